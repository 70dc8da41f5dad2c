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
    """Pairs at one layer, ready to swap: the base's residual at every position
    ``[pair, position, d_model]``, the source's at its answer position ``[pair, d_model]``
    (tensors on the model's device), the base rows as a batch, the source's oracle in the
    base's option order ``[pair, option]`` (the training target), and the clean runs' option
    log-probs of base and source ``[pair, option]``."""

    base: Tensor
    source: Tensor
    batch: RowBatch
    target: F64
    base_logprob: F64
    source_logprob: F64


def layer_rows(model: LoadedModel, base: Sequence[TokenizedQuery],
               source: Sequence[TokenizedQuery], target: F64, layers: Sequence[int],
               chunk: int = 64) -> dict[int, LayerRows]:
    """The :class:`LayerRows` at each of ``layers`` of the pairs ``base[i]`` / ``source[i]``,
    from one clean run of each (in chunks of ``chunk`` pairs; single-token options: the swap
    reads one row per query)."""
    import torch

    batch = RowBatch.of(base)
    if len(batch.rows) != len(base):
        raise ValueError("a subspace swap needs read-outs with single-token options")
    b_parts: dict[int, list[Tensor]] = {la: [] for la in layers}
    s_parts: dict[int, list[Tensor]] = {la: [] for la in layers}
    logprobs = np.full((2, len(base), batch.n_options), np.nan)
    for start in range(0, len(base), chunk):
        cb = clean_run(model, RowBatch.of(base[start : start + chunk]), keep_cache=False)
        sb = RowBatch.of(source[start : start + chunk])
        cs = clean_run(model, sb, keep_cache=False)
        for la in layers:
            res = cb.resid[la]
            b_parts[la].append(torch.nn.functional.pad(res, (0, 0, 0, batch.width
                                                             - res.shape[1])))
            s_parts[la].append(at_answer(cs.resid[la], sb))
        for i, run in enumerate((cb, cs)):
            logprobs[i, start : start + run.logprob.shape[0], : run.logprob.shape[1]] = (
                run.logprob)
        del cb, cs
    return {la: LayerRows(torch.cat(b_parts[la]), torch.cat(s_parts[la]), batch, target,
                          *logprobs) for la in layers}


def swapped(rows: LayerRows, basis: Tensor, index: Tensor | None = None) -> Tensor:
    """The base residuals (of the pairs ``index``; ``None``: all) with the answer position's
    component in ``basis [d_model, k]`` taken from the source."""
    base = rows.base if index is None else rows.base[index]
    src = rows.source if index is None else rows.source[index]
    batch = rows.batch if index is None else _sub_batch(rows.batch, index)
    ans = at_answer(base, batch)
    return with_answer(base, batch, ans + ((src - ans) @ basis) @ basis.T)


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

    b = torch.as_tensor(basis, dtype=rows.base.dtype, device=rows.base.device)
    out = np.full((len(rows.batch.queries), rows.batch.n_options), np.nan)
    with torch.inference_mode():
        for start in range(0, out.shape[0], chunk):
            idx = torch.arange(start, min(start + chunk, out.shape[0]))
            lp = option_logprobs_from(model, _sub_batch(rows.batch, idx), layer,
                                      swapped(rows, b, idx))
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

    lp = option_logprobs_from(model, _sub_batch(rows.batch, index), layer, moved)
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
    d = int(rows.base.shape[-1])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe.seed)
        rotation = pv.LowRankRotatedSpaceIntervention(embed_dim=d,
                                                      low_rank_dimension=recipe.rank)
    rotation.to(rows.base.device)
    opt = torch.optim.Adam(rotation.parameters(), lr=recipe.lr)
    gen = torch.Generator().manual_seed(recipe.seed)
    n = int(rows.base.shape[0])
    losses = np.zeros(recipe.steps)
    with frozen(model), torch.enable_grad():
        for step in range(recipe.steps):
            index = torch.randperm(n, generator=gen)[: recipe.batch_pairs]
            base, batch = rows.base[index], _sub_batch(rows.batch, index)
            ans = at_answer(base, batch)
            moved = with_answer(base, batch, rotation(ans, rows.source[index]))
            loss = _loss(model, rows, layer, moved, index)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[step] = float(loss.detach())
            if on_step is not None:
                on_step(step, losses[step])
    basis = rotation.rotate_layer.weight.detach().double().cpu().numpy()
    return np.asarray(basis, dtype=np.float64), losses
