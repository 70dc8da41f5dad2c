"""Distributed alignment search: a rank-``k`` subspace of the residual stream, learned by
interchange.

At one layer, at the answer position, a **subspace swap** replaces the base read-out's
component in a ``k``-dimensional subspace (an orthonormal basis ``R [d_model, k]``) by the
source read-out's, leaving the rest of the base's residual as it was::

    x_base + (x_source - x_base) R Rᵀ

and runs blocks ``l .. L-1`` on top
(:func:`~belieflens.interventions.forward.option_logprobs_from`).
Distributed alignment search (DAS; Geiger et al. 2024) learns ``R`` by gradient descent on
training pairs so that the swapped base answers as the **oracle** does for the source: the
loss is the cross-entropy of the swapped output's distribution over the options against the
source's oracle (the exact posterior's next answer; the causal model's counterfactual), the
model's weights frozen. The map is pyvene's ``LowRankRotatedSpaceIntervention`` (torch's
orthogonal parametrization of ``R``, initialised at a random orthonormal basis); this module
drives it on belieflens's own residual stream (the cache file's layers and hook points) rather
than through pyvene's ``IntervenableModel``, which names each architecture's modules itself
and has no mapping for every model belieflens loads.

The same swap with a basis drawn at random (:func:`random_basis`) is the control at the same
``k``; :func:`swap_logprobs` runs any basis, learned or not, the same way.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from belieflens.interventions.forward import (
    RowBatch,
    answer_logprobs,
    at_answer,
    clean_run,
    option_logprobs_from,
    with_answer,
)
from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery

F64 = NDArray[np.float64]
Tensor = Any
"""A ``torch.Tensor`` (torch is imported only when a model runs)."""


@dataclass(frozen=True)
class Recipe:
    """How a subspace is trained: its rank, the optimiser's steps, learning rate and pairs per
    step, and the seed of the initial basis and of the order the pairs are drawn in."""

    rank: int = 2
    steps: int = 300
    lr: float = 0.01
    batch_pairs: int = 64
    seed: int = 0


@dataclass(frozen=True, eq=False)
class LayerRows:
    """Pairs at one layer, ready to swap (tensors on the model's device): the base's and the
    source's residual at the answer position ``[pair, d_model]``, the base rows as a batch,
    the source's oracle in the base's option order ``[pair, option]`` (the training target),
    and the clean runs' option log-probs of base and source ``[pair, option]``.

    The rest of a base's context is run from one clean run of each distinct base read-out
    (``unique [pair]``: the pair's base among them): through its key/value ``cache`` where
    the model's cache can be reused (only the answer position runs again:
    :func:`~belieflens.interventions.forward.answer_logprobs`), else from its residual
    ``context [base, position, d_model]`` at this layer (every position runs again)."""

    answer: Tensor
    source: Tensor
    batch: RowBatch
    target: F64
    base_logprob: F64
    source_logprob: F64
    unique: Tensor
    cache: Any = None
    context: Tensor | None = None


@dataclass
class _Runs:
    """Clean runs of distinct read-outs: each one's residual at every layer at its answer
    position, (without a cache) at every position, its option log-probs, and the cache."""

    answer: dict[int, list[Tensor]]
    context: dict[int, list[Tensor]]
    logprob: list[F64]
    caches: list[Any]


def _distinct(queries: Sequence[TokenizedQuery]) -> tuple[list[TokenizedQuery], list[int]]:
    """The distinct read-outs in first-seen order, and each query's index among them."""
    index: dict[TokenizedQuery, int] = {}
    of = [index.setdefault(q, len(index)) for q in queries]
    return list(index), of


def _clean_runs(model: LoadedModel, queries: Sequence[TokenizedQuery], layers: Sequence[int],
                chunk: int, *, context: bool) -> tuple[_Runs, RowBatch]:
    """One clean run of ``queries`` (in chunks), with the key/value cache or (``context``,
    where there is none) the residual at every position of ``layers``."""
    import torch

    batch = RowBatch.of(queries)
    if len(batch.rows) != len(queries):
        raise ValueError("a subspace swap needs read-outs with single-token options")
    runs = _Runs({la: [] for la in layers}, {la: [] for la in layers}, [], [])
    for start in range(0, len(queries), chunk):
        part = RowBatch.of(queries[start : start + chunk])
        run = clean_run(model, part, keep_cache=context, layers=layers)
        if run.cache is not None:
            runs.caches.append(run.cache)
        for la in layers:
            runs.answer[la].append(at_answer(run.resid[la], part))
            if context and run.cache is None:
                runs.context[la].append(torch.nn.functional.pad(
                    run.resid[la], (0, 0, 0, batch.width - run.resid[la].shape[1])))
        lp = np.full((len(part.queries), batch.n_options), np.nan)
        lp[:, : run.logprob.shape[1]] = run.logprob
        runs.logprob.append(lp)
        del run
    return runs, batch


def layer_rows(model: LoadedModel, base: Sequence[TokenizedQuery],
               source: Sequence[TokenizedQuery], target: F64, layers: Sequence[int],
               chunk: int = 64) -> dict[int, LayerRows]:
    """The :class:`LayerRows` at each of ``layers`` of the pairs ``base[i]`` / ``source[i]``,
    from one clean run of each distinct base and each distinct source (in chunks of
    ``chunk``; single-token options: the swap reads one row per query)."""
    import torch

    from belieflens.model.kv_cache import stack_caches

    batch = RowBatch.of(base)
    if len(batch.rows) != len(base):
        raise ValueError("a subspace swap needs read-outs with single-token options")
    bases, b_of = _distinct(base)
    sources, s_of = _distinct(source)
    b_runs, b_batch = _clean_runs(model, bases, layers, chunk, context=True)
    s_runs, _ = _clean_runs(model, sources, layers, chunk, context=False)
    whole = len(b_runs.caches) == -(-len(bases) // chunk)
    cache = stack_caches(b_runs.caches, b_batch.width) if whole else None
    device = b_runs.answer[layers[0]][0].device
    bi, si = (torch.as_tensor(x, device=device) for x in (b_of, s_of))
    b_lp, s_lp = (_widened(np.concatenate(r.logprob)[of], batch.n_options)
                  for r, of in ((b_runs, b_of), (s_runs, s_of)))
    out = {}
    for la in layers:
        context = None if cache is not None else torch.cat(b_runs.context[la])
        out[la] = LayerRows(torch.cat(b_runs.answer[la])[bi], torch.cat(s_runs.answer[la])[si],
                            batch, target, b_lp, s_lp, bi, cache, context)
    return out


def _widened(x: F64, width: int) -> F64:
    """``x [row, option]`` cut or NaN-padded to ``width`` options."""
    out = np.full((x.shape[0], width), np.nan)
    n = min(width, x.shape[1])
    out[:, :n] = x[:, :n]
    return out


def _values(rows: LayerRows, basis: Tensor, index: Tensor | None = None) -> Tensor:
    """The base's answer-position residuals (of the pairs ``index``; ``None``: all) with
    their component in ``basis [d_model, k]`` taken from the source."""
    ans = rows.answer if index is None else rows.answer[index]
    src = rows.source if index is None else rows.source[index]
    return ans + ((src - ans) @ basis) @ basis.T


def swapped_logprobs(model: LoadedModel, rows: LayerRows, layer: int, values: Tensor,
                     index: Tensor) -> Tensor:
    """Option log-probs ``[pair, option]`` (a torch tensor, with the autograd graph from
    ``values``) of the pairs ``index`` when each base's layer-``layer`` residual at its
    answer position is ``values [pair, d_model]``, the rest of its context clean."""
    batch = _sub_batch(rows.batch, index)
    if rows.cache is not None:
        return answer_logprobs(model, batch, layer, values, rows.cache, rows.unique[index])
    assert rows.context is not None
    context = rows.context[rows.unique[index]]
    return option_logprobs_from(model, batch, layer, with_answer(context, batch, values))


def _sub_batch(batch: RowBatch, index: Tensor) -> RowBatch:
    """The rows ``index`` of ``batch``, at its width (one row per query)."""
    idx = [int(i) for i in index.tolist()]
    return RowBatch(tuple(batch.queries[i] for i in idx),
                    tuple(_row_at(batch, i, k) for k, i in enumerate(idx)), batch.width)


def _row_at(batch: RowBatch, i: int, k: int) -> Any:
    """Row ``i`` of ``batch`` renumbered as query ``k``."""
    import dataclasses

    return dataclasses.replace(batch.rows[i], query=k)


def swap_logprobs(model: LoadedModel, rows: LayerRows, layer: int, basis: F64,
                  chunk: int = 64) -> F64:
    """Option log-probs ``[pair, option]`` of every base with the ``basis`` subspace swapped in
    from its source at ``layer``."""
    import torch

    b = torch.as_tensor(basis, dtype=rows.answer.dtype, device=rows.answer.device)
    out = np.full((len(rows.batch.queries), rows.batch.n_options), np.nan)
    with torch.inference_mode():
        for start in range(0, out.shape[0], chunk):
            idx = torch.arange(start, min(start + chunk, out.shape[0]),
                               device=rows.answer.device)
            lp = swapped_logprobs(model, rows, layer, _values(rows, b, idx), idx)
            out[start : start + idx.numel(), : lp.shape[1]] = lp.double().cpu().numpy()
    return out


def random_basis(d: int, rank: int, rng: np.random.Generator) -> F64:
    """An orthonormal basis ``[d, rank]`` of a subspace drawn uniformly (the control)."""
    q, r = np.linalg.qr(rng.standard_normal((d, rank)))
    return np.asarray(q * np.sign(np.diag(r))[None, :], dtype=np.float64)


def _pyvene() -> Any:
    """pyvene, imported quietly (it prints a line about an optional backend)."""
    with contextlib.redirect_stdout(io.StringIO()):
        import pyvene

    return pyvene


@contextlib.contextmanager
def frozen(model: LoadedModel) -> Iterator[None]:
    """Inside the block the model's weights take no gradient (restored after)."""
    params = list(model.bridge.parameters())
    before = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(params, before, strict=True):
            p.requires_grad_(flag)


def _loss(model: LoadedModel, rows: LayerRows, layer: int, moved: Tensor,
          index: Tensor) -> Tensor:
    """Cross-entropy of the swapped outputs over the options against the target."""
    import torch

    lp = swapped_logprobs(model, rows, layer, moved, index)
    n = rows.target.shape[1]
    logq = torch.log_softmax(lp[:, :n], dim=-1)
    target = torch.as_tensor(rows.target[index.cpu().numpy()], dtype=logq.dtype,
                             device=logq.device)
    return -(torch.nan_to_num(target * logq)).sum(-1).mean()


def train_basis(model: LoadedModel, rows: LayerRows, layer: int, recipe: Recipe,
                on_step: Callable[[int, float], None] | None = None) -> tuple[F64, F64]:
    """The DAS basis ``[d_model, rank]`` learned on ``rows`` at ``layer`` (module docstring),
    and the training loss at every step ``[steps]``."""
    import torch

    pv = _pyvene()
    d = int(rows.answer.shape[-1])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe.seed)
        rotation = pv.LowRankRotatedSpaceIntervention(embed_dim=d,
                                                      low_rank_dimension=recipe.rank)
    rotation.to(rows.answer.device)
    opt = torch.optim.Adam(rotation.parameters(), lr=recipe.lr)
    gen = torch.Generator().manual_seed(recipe.seed)
    n = int(rows.answer.shape[0])
    losses = np.zeros(recipe.steps)
    with frozen(model), torch.enable_grad():
        for step in range(recipe.steps):
            index = torch.randperm(n, generator=gen)[: recipe.batch_pairs].to(
                rows.answer.device)
            moved = rotation(rows.answer[index], rows.source[index])
            loss = _loss(model, rows, layer, moved, index)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[step] = float(loss.detach())
            if on_step is not None:
                on_step(step, losses[step])
    basis = rotation.rotate_layer.weight.detach().double().cpu().numpy()
    return np.asarray(basis, dtype=np.float64), losses
