"""A lens applied to a cache file: each layer's scores of the answer options, without a model.

**Lens and head.** A :class:`Lens` first maps layer ``l``'s residual ``h`` (the identity
for :class:`LogitLens`; per-layer translators for a
:class:`~belieflens.lens.TunedLens`); the result goes through the model's
:class:`~belieflens.lens.head.Head`: the final norm, recomputed on that residual
(TransformerLens #1076), and the stored unembedding rows (``unembed``, ``unembed_bias`` for
the token ids in ``lens_token_id``).

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
(:func:`belieflens.analysis.beliefs.lens_beliefs`). Every function reads the residuals ``chunk``
queries at a time, so files larger than memory work.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import xarray as xr
from jaxtyping import Float

from belieflens.dims import CONT_EXTRA, LAYER, OPTION, QUERY
from belieflens.lens.base import Lens, LogitLens
from belieflens.lens.head import FinalNorm, Head

MultiToken = Literal["auto", "first-token"]
"""``auto``: score whole continuations where ``cont_resid`` is stored; ``first-token``: never."""

CONT_RESID = "cont_resid"


def _lens_or_logit(lens: Lens | None) -> Lens:
    return LogitLens() if lens is None else lens


def _short_name(lens: Lens) -> str:
    return lens.name.removesuffix("-lens")


def final_norm_of(ds: xr.Dataset) -> FinalNorm:
    """The final norm recorded in a cache file."""
    return Head.from_dataset(ds).norm


def _query_array(ds: xr.Dataset, values: np.ndarray, name: str) -> xr.DataArray:
    """``[query, layer, option]`` values with the file's query coordinates."""
    coords = {k: v for k, v in ds.coords.items() if v.dims == (QUERY,)}
    layer = ds[LAYER].values if LAYER in ds.coords else np.arange(values.shape[1])
    return xr.DataArray(values, dims=(QUERY, LAYER, OPTION),
                        coords={**coords, LAYER: layer}, name=name)


def _resid(ds: xr.Dataset, s: int, e: int) -> np.ndarray:
    return np.asarray(ds["resid"].isel(query=slice(s, e)).values, dtype=np.float64)


def lens_logits(
    ds: xr.Dataset, *, chunk: int = 256, lens: Lens | None = None
) -> xr.DataArray:
    """Lens logits of each option's first token at every layer (NaN for padded options).

    Dims ``(query, layer, option)`` with the file's query coordinates. With ``lens=None``
    this is the logit lens; at the last layer the logits minus ``answer_lse`` are the
    model's own first-token log-probs.
    """
    use = _lens_or_logit(lens)
    head = Head.from_dataset(ds)
    w, b = head.weight, head.bias
    first = np.asarray(ds["option_lens_index"].values)[:, :, 0].astype(np.int64)
    n_q = ds.sizes["query"]
    out = np.full((n_q, ds.sizes["layer"], first.shape[1]), np.nan)
    for s in range(0, n_q, chunk):
        e = min(s + chunk, n_q)
        h = head.normalise(use.transform(_resid(ds, s, e)))  # [q, layer, d]
        idx = first[s:e]
        safe = np.where(idx >= 0, idx, 0)
        logits = np.einsum("qld,qod->qlo", h, w[safe]) + b[safe][:, None, :]
        out[s:e] = np.where((idx >= 0)[:, None, :], logits, np.nan)
    res = _query_array(ds, out, "lens_logit")
    res.attrs["lens"] = _short_name(use)
    return res


def _log_normalised(head: Head, h: np.ndarray) -> np.ndarray:
    """Log-softmax of the head's logits over the stored lens rows: ``[..., lens_token]``."""
    z = head.logits(h)
    m = np.max(z, axis=-1, keepdims=True)
    return np.asarray(z - m - np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True)))


def has_continuations(ds: xr.Dataset) -> bool:
    """Whether the file stores residuals at continuation positions (``cont_resid``)."""
    return CONT_RESID in ds.variables and ds.sizes.get(CONT_EXTRA, 0) > 0


def lens_option_logprob(
    ds: xr.Dataset,
    *,
    chunk: int = 256,
    lens: Lens | None = None,
    multi_token: MultiToken = "auto",
    memory_budget: int = 2**26,
) -> xr.DataArray:
    """Lens log-score of every option at every layer (module docstring for the definition).

    Dims ``(query, layer, option)`` with the file's query coordinates. Terms are normalised
    over the stored ``lens_token`` rows; padded options are NaN. With
    ``multi_token="auto"`` and ``cont_resid`` in the file, later continuation tokens are
    scored at their own positions; otherwise only the first token is.
    """
    return _query_array(
        ds, _option_logprob(ds, chunk=chunk, lens=_lens_or_logit(lens), multi_token=multi_token,
                            memory_budget=memory_budget), "lens_logprob")


def _score_block(
    resid: np.ndarray,
    index: np.ndarray,
    cont: np.ndarray | None,
    *,
    head: Head,
    lens: Lens,
    n_extra: int,
    sub: int,
) -> np.ndarray:
    """Lens log-scores ``[q, layer, option]`` of one block of read-outs.

    ``resid [q, layer, d_model]``, ``index [q, option, cont]`` (lens rows of each option's
    tokens, -1 past its end), ``cont [q, option, cont_extra, layer, d_model]`` or None.
    Residuals are scored ``sub`` queries at a time (a memory bound: each is converted to
    float64 and normalised in turn, never the whole block).
    """
    index = np.asarray(index, dtype=np.int64)  # a block's only: the file's stays as stored
    n_opt = index.shape[1]
    idx = index[:, :, 0]
    score = np.full((resid.shape[0], resid.shape[1], n_opt), np.nan)
    for a in range(0, resid.shape[0], sub):  # a float64 copy of `sub` rows at a time
        z = min(a + sub, resid.shape[0])
        logp = _log_normalised(head, lens.transform(np.asarray(resid[a:z], dtype=np.float64)))
        ia = idx[a:z]
        first = np.take_along_axis(logp, np.where(ia >= 0, ia, 0)[:, None, :], axis=-1)
        score[a:z] = np.where((ia >= 0)[:, None, :], first, np.nan)
    for i in range(n_extra if cont is not None else 0):
        assert cont is not None
        tok = index[:, :, i + 1]  # [q, option]: token i+1, predicted at position i
        if not (tok >= 0).any():
            continue
        for a in range(0, tok.shape[0], sub):
            z = min(a + sub, tok.shape[0])
            hc = np.asarray(cont[a:z, :n_opt, i], dtype=np.float64)  # [q, option, layer, d]
            lp = _log_normalised(head, lens.transform(hc))  # [q, option, layer, lens_token]
            t = tok[a:z]
            got = np.take_along_axis(lp, np.where(t >= 0, t, 0)[:, :, None, None], axis=-1)
            add = np.where((t >= 0)[:, :, None], got[..., 0], 0.0)  # [q, option, layer]
            score[a:z] += np.transpose(add, (0, 2, 1))
    return np.asarray(score, dtype=np.float64)


def _is_dask(da: xr.DataArray) -> bool:
    return da.chunks is not None


def query_blocks(da: xr.DataArray, chunk: int) -> list[tuple[int, int]]:
    """``(start, stop)`` blocks of ``query`` to read ``da`` by: its dask chunks along
    ``query`` when it has them (a read never splits a chunk, so none is read twice),
    else blocks of ``chunk`` queries."""
    n = da.sizes[QUERY]
    if da.chunks is not None:
        sizes = da.chunks[da.dims.index(QUERY)]
        stops = np.cumsum(sizes)
        return [(int(b - a), int(b)) for a, b in zip(sizes, stops, strict=True)]
    return [(s, min(s + chunk, n)) for s in range(0, n, chunk)]


def _gather_blocks(scored: Any, wave: int = 16) -> np.ndarray:
    """A dask array of scores computed into one preallocated array, ``wave`` chunks of
    queries at a time (``.values`` held every chunk and their concatenation at once)."""
    from dask.base import compute

    out = np.empty(scored.shape, dtype=np.float64)
    stops = np.cumsum(scored.chunks[0])
    starts = stops - np.asarray(scored.chunks[0])
    n = len(stops)
    for w in range(0, n, wave):
        idx = range(w, min(w + wave, n))
        done = compute(*[scored.blocks[i] for i in idx])  # type: ignore[no-untyped-call]
        for i, block in zip(idx, done, strict=True):
            out[int(starts[i]):int(stops[i])] = block
    return out


def _option_logprob(
    ds: xr.Dataset, *, chunk: int, lens: Lens, multi_token: MultiToken, memory_budget: int
) -> Float[np.ndarray, "query layer option"]:
    """Lens log-scores of every option at every layer, block by block.

    A dask-backed dataset (a study directory, or ``open_cache(..., chunks=...)``) is scored
    with :func:`xarray.apply_ufunc` (``dask="parallelized"``), one task per chunk of
    queries: memory is bounded by a chunk, and on a distributed client the workers read and
    score their chunks, sending back only ``[query, layer, option]``. A file read lazily
    from disk is scored ``chunk`` queries at a time by the same block function.
    """
    head = Head.from_dataset(ds)
    index = ds["option_lens_index"]  # [q, option, cont], as stored (int32)
    n_q, n_opt = index.shape[0], index.shape[1]
    n_layer = ds.sizes["layer"]
    use_cont = multi_token == "auto" and has_continuations(ds)
    n_extra = min(ds.sizes[CONT_EXTRA], index.shape[2] - 1) if use_cont else 0
    row_bytes = max(1, n_opt * n_layer * (ds.sizes["d_model"] + head.weight.shape[0]) * 8)
    sub = max(1, memory_budget // row_bytes)
    cont = (ds[CONT_RESID].transpose(QUERY, OPTION, CONT_EXTRA, LAYER, "d_model")
            if n_extra else None)
    resid = ds["resid"]
    if _is_dask(resid):
        # the index without its coordinates: chunked with it, they became dask arrays that
        # apply_ufunc compared with the residuals' own, computing them chunk by chunk
        args = [resid, index.reset_coords(drop=True).chunk(
            {QUERY: resid.chunks[0]})]  # type: ignore[index]
        core = [[LAYER, "d_model"], [OPTION, str(index.dims[2])]]
        if cont is not None:
            args.append(cont)
            core.append([OPTION, CONT_EXTRA, LAYER, "d_model"])

        def block(r: np.ndarray, i: np.ndarray, *c: np.ndarray) -> np.ndarray:
            return _score_block(r, i, c[0] if c else None, head=head, lens=lens,
                                n_extra=n_extra, sub=sub)

        scored = xr.apply_ufunc(
            block, *args, input_core_dims=core, output_core_dims=[[LAYER, OPTION]],
            dask="parallelized", output_dtypes=[np.float64], exclude_dims={OPTION},
            dask_gufunc_kwargs={"output_sizes": {OPTION: n_opt}},
        )
        return _gather_blocks(scored.transpose(QUERY, LAYER, OPTION).data)
    idx_all = np.asarray(index.values)
    out = np.full((n_q, n_layer, n_opt), np.nan)
    for s in range(0, n_q, chunk):
        e = min(s + chunk, n_q)
        c = None if cont is None else np.asarray(cont.isel({QUERY: slice(s, e)}).values)
        out[s:e] = _score_block(np.asarray(resid.isel({QUERY: slice(s, e)}).values),
                                idx_all[s:e], c, head=head, lens=lens, n_extra=n_extra,
                                sub=sub)
    return out


LENS_BLOCK_BYTES = 2**24
"""Bytes of the float64 working copy a lens block scores at a time (per thread)."""
