"""Training positions for the tuned lens, from the contexts the environments generate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float, Int

from belieflens.errors import ParameterError

DEFAULT_ENVS: tuple[str, ...] = (
    "coin-flip", "dice", "coins", "preference", "recommender", "medical-triage",
)
"""Environments whose queries supply training contexts by default."""

CONTEXT_PARAMS: dict[str, dict[str, object]] = {"recommender": {"delivery": "all"}}
"""Parameters of the environments whose defaults generate text (the recommender's
``multi-turn-self``): training contexts are rendered without a model, as they were before."""


@dataclass(frozen=True)
class Positions:
    """Residuals of every layer at sampled token positions.

    Attributes:
        resid: ``[position, layer, d_model]`` float32; layer 0 = embeddings, last = last block.
        context: index of the context each position comes from (for held-out splits).
        n_contexts: number of distinct contexts run.
        envs: the environments the contexts came from.
    """

    resid: Float[np.ndarray, "position layer d_model"]
    context: Int[np.ndarray, " position"]
    n_contexts: int
    envs: tuple[str, ...]


def _contexts(
    model: Any, envs: Sequence[str], episodes: int, seed: int, limit: int,
    rng: np.random.Generator,
) -> list[list[int]]:
    """Up to ``limit`` distinct rendered contexts, drawn round-robin over the environments."""
    from belieflens import envs as registry
    from belieflens.readouts.render import bos_policy, render
    from belieflens.run.extract import records

    pools = []
    for name in envs:
        recs = list(records(registry.get(name, **CONTEXT_PARAMS.get(name, {})), episodes, seed))
        pools.append([recs[i] for i in rng.permutation(len(recs))])
    bos = bos_policy(model.tokenizer)
    seen: set[tuple[int, ...]] = set()
    out: list[list[int]] = []
    cursor = [0] * len(pools)
    while len(out) < limit and any(c < len(p) for c, p in zip(cursor, pools, strict=True)):
        for k, pool in enumerate(pools):
            if cursor[k] >= len(pool) or len(out) >= limit:
                continue
            rec = pool[cursor[k]]
            cursor[k] += 1
            tq = render(model.tokenizer, rec.query, bos=bos)
            ids = tuple(tq.context_ids) + tuple(tq.option_ids[0])
            if ids not in seen:
                seen.add(ids)
                out.append(list(ids))
    return out


def collect_positions(
    model: Any,
    rng: np.random.Generator,
    *,
    envs: Sequence[str] = DEFAULT_ENVS,
    episodes: int = 2,
    seed: int = 0,
    max_contexts: int = 64,
    per_context: int = 24,
    batch_size: int = 8,
) -> Positions:
    """Run up to ``max_contexts`` environment contexts and keep residuals at sampled positions.

    Contexts are the rendered queries (context + first option) of ``episodes`` episodes of
    each environment (seeded by ``seed``): ``max_contexts`` distinct ones are drawn by
    ``rng``, in turn from each environment. In each context up to ``per_context`` positions
    are drawn among those
    whose token prefix was not seen before (identical prefixes give identical residuals, and
    the chat template's system prompt is shared by every context); the last position is
    always kept. Hooks copy only those rows, so memory is ``positions x layers x d_model``.
    """
    if max_contexts < 1 or per_context < 1:
        raise ParameterError(
            f"max_contexts = {max_contexts}, per_context = {per_context} are not allowed: >= 1"
        )
    chosen = _contexts(model, envs, episodes, seed, max_contexts, rng)
    if not chosen:
        raise ParameterError(f"environments {', '.join(envs)} produced no contexts")
    picks = _novel_positions(chosen, per_context, rng)
    parts: list[np.ndarray] = []
    owner: list[int] = []
    for s in range(0, len(chosen), batch_size):
        batch = chosen[s : s + batch_size]
        rows_b = [b for b in range(len(batch)) for _ in picks[s + b]]
        rows_p = [p for b in range(len(batch)) for p in picks[s + b]]
        if not rows_b:
            continue
        parts.append(_resid_at(model, batch, rows_b, rows_p))
        owner.extend(s + b for b in rows_b)
    resid = np.concatenate(parts).astype(np.float32)
    return Positions(resid, np.asarray(owner, dtype=np.int64), len(chosen), tuple(envs))


def _novel_positions(
    chosen: list[list[int]], per_context: int, rng: np.random.Generator
) -> list[list[int]]:
    """Per context, up to ``per_context`` positions whose token prefix no earlier one had
    (drawn by ``rng``; the last position always, if novel), sorted."""
    seen: set[int] = set()
    picks: list[list[int]] = []
    for ids in chosen:
        h = 0
        novel: list[int] = []
        for p, t in enumerate(ids):
            h = hash((h, t))
            if h not in seen:
                seen.add(h)
                novel.append(p)
        last = len(ids) - 1
        others = [p for p in novel if p != last]
        take = rng.choice(len(others), size=min(per_context - 1, len(others)), replace=False)
        picks.append(sorted([others[i] for i in take] + ([last] if last in novel else [])))
    return picks


def _resid_at(
    model: Any, batch: list[list[int]], rows_b: list[int], rows_p: list[int]
) -> np.ndarray:
    """Residuals ``[read, layer, d_model]`` of right-padded ``batch`` at ``(rows_b, rows_p)``."""
    import torch

    from belieflens.run.rows import pad_token_id, resid_capture_hooks, resid_hook_names

    n_layers = model.info.n_layers
    bridge = model.bridge
    device = next(bridge.original_model.parameters()).device
    width = max(len(x) for x in batch)
    tokens = torch.full((len(batch), width), pad_token_id(model.tokenizer), dtype=torch.long)
    for b, x in enumerate(batch):
        tokens[b, : len(x)] = torch.tensor(x)
    rb = torch.tensor(rows_b, device=device)
    rp = torch.tensor(rows_p, device=device)
    hooks, captured, _ = resid_capture_hooks(resid_hook_names(n_layers), (rb, rp))
    with torch.inference_mode():  # right padding: real tokens never attend to pads
        bridge.run_with_hooks(tokens.to(device), fwd_hooks=hooks, logits_to_keep=1)
    return torch.stack([captured[i] for i in range(n_layers + 1)], dim=1).numpy()
