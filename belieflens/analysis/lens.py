"""Lens beliefs per layer, computed offline from a cache file: the logit lens and the tuned lens.

**Head.** Layer ``l``'s residual ``h`` (optionally first mapped by a translator, e.g. a
:class:`~belieflens.analysis.tuned_lens.TunedLens`) is passed through the model's final
norm, recomputed on that residual (TransformerLens #1076), and the stored unembedding rows
(``unembed``, ``unembed_bias`` for the token ids in ``lens_token_id``).

**Single-token options** (every MCQ): a layer's score of option ``j`` is its first (and
only) token's lens logit at the answer position; the belief is the softmax over the
options. This is exact, and at the last layer it reproduces the model's own option
log-probs up to one constant per query (``answer_lse``).

**Multi-token options.** The model's ``log P(option)`` sums over the option's tokens; the
lens does the same::

    log P_l(option) = log p_l(t_0 | h_l at the answer position)
                      + sum_{i >= 1} log p_l(t_i | h_l at continuation position i-1)

where the later residuals come from ``cont_resid`` (dims ``query, option, cont_extra,
layer, d_model``: the residual at continuation token ``i`` of each option's own row, which
predicts token ``i+1``). A proper ``log p_l`` needs the full-vocabulary normaliser, which an
offline analysis cannot compute from the stored rows: **each term is normalised over the
stored ``lens_token`` rows** (every token of every option in the file). For the first
token this normaliser is shared by all options of a query and cancels in the belief; for
later tokens it does not, so at the last layer a multi-token lens belief approximates
(rather than reproduces) the output belief. Files without ``cont_resid`` fall back to the
**first-token approximation**: only ``t_0`` is scored, so options that share their first
token get equal scores.

Lens scores are then debiased over rotations exactly like output beliefs
(:func:`belieflens.analysis.beliefs.pool`). Every function reads the residuals ``chunk``
queries at a time, so files larger than memory work.
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np
import xarray as xr
from jaxtyping import Float

from belieflens.analysis.beliefs import _coords, _scatter, instances, pool
from belieflens.cache.lens_params import FinalNorm
from belieflens.dims import CONT_EXTRA, LAYER
from belieflens.types import DebiasMethod

MultiToken = Literal["auto", "first-token"]
"""``auto``: score whole continuations where ``cont_resid`` is stored; ``first-token``: never."""

CONT_RESID = "cont_resid"


class Translator(Protocol):
    """Maps residuals ``[..., layer, d_model]`` to residuals of the same shape (a tuned lens)."""

    def __call__(
        self, resid: Float[np.ndarray, "*batch layer d_model"]
    ) -> Float[np.ndarray, "*batch layer d_model"]:
        """Translate every layer's residual."""
        ...


def final_norm_of(ds: xr.Dataset) -> FinalNorm:
    """The final norm recorded in a cache file."""
    kind = str(ds.attrs.get("final_norm_kind", "rms"))
    return FinalNorm(
        kind="layer" if kind == "layer" else "rms",
        eps=float(ds.attrs.get("final_norm_eps", 1e-6)),
        gain=np.asarray(ds["final_norm_gain"].values, dtype=np.float64),
        bias=np.asarray(ds["final_norm_bias"].values, dtype=np.float64),
    )


def _head(ds: xr.Dataset) -> tuple[FinalNorm, np.ndarray, np.ndarray]:
    return (
        final_norm_of(ds),
        np.asarray(ds["unembed"].values, dtype=np.float64),
        np.asarray(ds["unembed_bias"].values, dtype=np.float64),
    )


def lens_logits(
    ds: xr.Dataset, *, chunk: int = 256, translator: Translator | None = None
) -> Float[np.ndarray, "query layer option"]:
    """Lens logits of each option's first token at every layer (NaN for padded options).

    With ``translator=None`` this is the logit lens; at the last layer the logits minus
    ``answer_lse`` are the model's own first-token log-probs.
    """
    norm, w, b = _head(ds)
    first = np.asarray(ds["option_lens_index"].values)[:, :, 0].astype(np.int64)
    n_q = ds.sizes["query"]
    out = np.full((n_q, ds.sizes["layer"], first.shape[1]), np.nan)
    for s in range(0, n_q, chunk):
        e = min(s + chunk, n_q)
        resid = np.asarray(ds["resid"].isel(query=slice(s, e)).values, dtype=np.float64)
        h = norm.apply(resid if translator is None else translator(resid))  # [q, layer, d]
        idx = first[s:e]
        safe = np.where(idx >= 0, idx, 0)
        logits = np.einsum("qld,qod->qlo", h, w[safe]) + b[safe][:, None, :]
        out[s:e] = np.where((idx >= 0)[:, None, :], logits, np.nan)
    return out


def _log_normalised(h: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log-softmax over the stored lens rows: ``[..., d] -> [..., lens_token]``."""
    z = h @ w.T + b
    m = np.max(z, axis=-1, keepdims=True)
    return np.asarray(z - m - np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True)))


def has_continuations(ds: xr.Dataset) -> bool:
    """Whether the file stores residuals at continuation positions (``cont_resid``)."""
    return CONT_RESID in ds.variables and ds.sizes.get(CONT_EXTRA, 0) > 0


def lens_option_logprob(
    ds: xr.Dataset,
    *,
    chunk: int = 256,
    translator: Translator | None = None,
    multi_token: MultiToken = "auto",
    memory_budget: int = 2**26,
) -> Float[np.ndarray, "query layer option"]:
    """Lens log-score of every option at every layer (module docstring for the definition).

    Terms are normalised over the stored ``lens_token`` rows; padded options are NaN.
    With ``multi_token="auto"`` and ``cont_resid`` in the file, later continuation tokens
    are scored at their own positions; otherwise only the first token is.
    """
    norm, w, b = _head(ds)
    index = np.asarray(ds["option_lens_index"].values).astype(np.int64)  # [q, option, cont]
    n_q, n_opt = index.shape[0], index.shape[1]
    n_layer = ds.sizes["layer"]
    use_cont = multi_token == "auto" and has_continuations(ds)
    n_extra = min(ds.sizes[CONT_EXTRA], index.shape[2] - 1) if use_cont else 0
    out = np.full((n_q, n_layer, n_opt), np.nan)
    row_bytes = max(1, n_opt * n_layer * (ds.sizes["d_model"] + w.shape[0]) * 8)
    sub = max(1, memory_budget // row_bytes)
    for s in range(0, n_q, chunk):
        e = min(s + chunk, n_q)
        resid = np.asarray(ds["resid"].isel(query=slice(s, e)).values, dtype=np.float64)
        h = norm.apply(resid if translator is None else translator(resid))
        logp = _log_normalised(h, w, b)  # [q, layer, lens_token]
        idx = index[s:e, :, 0]
        first = np.take_along_axis(logp, np.where(idx >= 0, idx, 0)[:, None, :], axis=-1)
        score = np.where((idx >= 0)[:, None, :], first, np.nan)
        for i in range(n_extra):
            tok = index[s:e, :, i + 1]  # [q, option]: token i+1, predicted at position i
            if not (tok >= 0).any():
                continue
            for a in range(s, e, sub):
                z = min(a + sub, e)
                cont = ds[CONT_RESID].isel({"query": slice(a, z), CONT_EXTRA: i})
                hc = np.asarray(cont.transpose("query", "option", LAYER, "d_model").values,
                                dtype=np.float64)[:, :n_opt]
                hc = norm.apply(hc if translator is None else translator(hc))
                lp = _log_normalised(hc, w, b)  # [q, option, layer, lens_token]
                t = tok[a - s : z - s]
                got = np.take_along_axis(lp, np.where(t >= 0, t, 0)[:, :, None, None], axis=-1)
                add = np.where((t >= 0)[:, :, None], got[..., 0], 0.0)  # [q, option, layer]
                score[a - s : z - s] += np.transpose(add, (0, 2, 1))
        out[s:e] = score
    return out


def lens_beliefs(
    ds: xr.Dataset,
    *,
    method: DebiasMethod = "geometric",
    translator: Translator | None = None,
    multi_token: MultiToken = "auto",
    chunk: int = 256,
) -> xr.DataArray:
    """Debiased lens beliefs (logit lens, or tuned lens with a ``translator``).

    Dims: ``(delivery, probe, episode, turn, layer, outcome)``; attrs record the lens and
    whether multi-token options were scored whole (``multi_token``).
    """
    inst = instances(ds)
    logp = lens_option_logprob(ds, chunk=chunk, translator=translator, multi_token=multi_token)
    logp = np.where(np.isnan(logp), -np.inf, logp)
    m = np.max(logp, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    logp = logp - m - np.log(np.sum(np.exp(logp - m), axis=-1, keepdims=True))
    outcome = np.asarray(ds["outcome"].values).astype(np.int64)
    pooled = pool(inst, logp, outcome, method)  # [instance, layer, outcome]
    coords = _coords(inst)
    coords["layer"] = list(range(ds.sizes["layer"]))
    whole = multi_token == "auto" and has_continuations(ds)
    return xr.DataArray(
        _scatter(inst, pooled),
        dims=("delivery", "probe", "episode", "turn", "layer", "outcome"),
        coords=coords,
        name="lens_belief",
        attrs={
            "lens": "logit" if translator is None else "tuned",
            "multi_token": "continuation" if whole else "first-token",
            "debias": method,
        },
    )
