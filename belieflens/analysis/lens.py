"""The logit lens, computed offline from a cache file.

For layer ``l`` the residual at the answer position is passed through the
model's final norm (recomputed on that layer's residual, TransformerLens #1076)
and the stored unembedding rows of the option tokens. A layer's belief over
the options is the softmax over the options of the lens logits of each
option's **first continuation token**; for single-token options (every MCQ)
this is exact, and at the last layer it reproduces the model's own option
log-probs. Lens beliefs are then debiased over rotations like output beliefs.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from jaxtyping import Float

from belieflens.analysis.beliefs import _coords, _scatter, instances, pool
from belieflens.cache.lens_params import FinalNorm
from belieflens.types import DebiasMethod


def final_norm_of(ds: xr.Dataset) -> FinalNorm:
    """The final norm recorded in a cache file."""
    kind = str(ds.attrs.get("final_norm_kind", "rms"))
    return FinalNorm(
        kind="layer" if kind == "layer" else "rms",
        eps=float(ds.attrs.get("final_norm_eps", 1e-6)),
        gain=np.asarray(ds["final_norm_gain"].values, dtype=np.float64),
        bias=np.asarray(ds["final_norm_bias"].values, dtype=np.float64),
    )


def lens_logits(
    ds: xr.Dataset, *, chunk: int = 256
) -> Float[np.ndarray, "query layer option"]:
    """Logit-lens logits of each option's first token, at every layer (NaN for padded options)."""
    norm = final_norm_of(ds)
    w = np.asarray(ds["unembed"].values, dtype=np.float64)
    b = np.asarray(ds["unembed_bias"].values, dtype=np.float64)
    first = np.asarray(ds["option_lens_index"].values)[:, :, 0].astype(np.int64)
    n_q = ds.sizes["query"]
    n_l = ds.sizes["layer"]
    out = np.full((n_q, n_l, first.shape[1]), np.nan)
    for s in range(0, n_q, chunk):
        e = min(s + chunk, n_q)
        resid = np.asarray(ds["resid"].isel(query=slice(s, e)).values, dtype=np.float64)
        h = norm.apply(resid)  # [q, layer, d]
        idx = first[s:e]
        safe = np.where(idx >= 0, idx, 0)
        rows = w[safe]  # [q, option, d]
        logits = np.einsum("qld,qod->qlo", h, rows) + b[safe][:, None, :]
        out[s:e] = np.where((idx >= 0)[:, None, :], logits, np.nan)
    return out


def lens_beliefs(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.DataArray:
    """Debiased logit-lens beliefs.

    Dims: ``(delivery, probe, episode, turn, layer, outcome)``.
    """
    inst = instances(ds)
    logits = lens_logits(ds)
    logits = np.where(np.isnan(logits), -np.inf, logits)
    m = np.max(logits, axis=-1, keepdims=True)
    logp = logits - m - np.log(np.sum(np.exp(logits - m), axis=-1, keepdims=True))
    outcome = np.asarray(ds["outcome"].values).astype(np.int64)
    pooled = pool(inst, logp, outcome, method)  # [instance, layer, outcome]
    coords = _coords(inst)
    coords["layer"] = list(range(ds.sizes["layer"]))
    return xr.DataArray(
        _scatter(inst, pooled),
        dims=("delivery", "probe", "episode", "turn", "layer", "outcome"),
        coords=coords,
        name="lens_belief",
    )
