"""Read-outs and forward rows: what a query yields and which token rows it costs.

Shared by the padded-batch runner (:mod:`belieflens.run.runner`) and the radix-tree
runner (:mod:`belieflens.run.trie_runner`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from belieflens.readouts.render import TokenizedQuery


@dataclass(frozen=True)
class ReadOut:
    """What one query yields."""

    resid: Float[np.ndarray, "layer d_model"]
    option_logprob: Float[np.ndarray, " option"]
    answer_lse: float
    logprobs: Float[np.ndarray, " vocab"] | None = None
    cont_resid: Float[np.ndarray, "option cont_extra layer d_model"] | None = None


@dataclass(frozen=True)
class Row:
    """One forward row: the tokens run, where the answer is read, which option."""

    query: int
    ids: tuple[int, ...]
    answer_pos: int
    option: int | None  # None: the row reads every (single-token) option


def resid_hook_names(n_layers: int) -> list[str]:
    """Hook names whose outputs are layers 0..n_layers of the schema's ``resid``."""
    return ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(n_layers)]


def pad_token_id(tokenizer: Any) -> int:
    """The id padding is written with: the tokenizer's pad token, else 0 (masked either way)."""
    pad = getattr(tokenizer, "pad_token_id", None)
    return 0 if pad is None else int(pad)


def resid_capture_hooks(
    names: list[str], at: tuple[Any, Any], extra: tuple[Any, Any] | None = None
) -> tuple[list[tuple[str, Any]], dict[int, Any], dict[int, Any]]:
    """Hooks copying each named layer's residual (float32, on the CPU) at ``at`` (batch rows,
    positions) and, if given, at the ``extra`` positions; with the dicts they copy into, by
    layer index."""
    captured: dict[int, Any] = {}
    captured_extra: dict[int, Any] = {}

    def make_hook(layer: int) -> Any:
        def hook(tensor: Any, hook: Any) -> Any:
            captured[layer] = tensor[at].detach().float().cpu()
            if extra is not None:
                captured_extra[layer] = tensor[extra].detach().float().cpu()
            return tensor

        return hook

    return [(name, make_hook(i)) for i, name in enumerate(names)], captured, captured_extra


def forward_rows(tqs: Sequence[TokenizedQuery]) -> list[Row]:
    """The forward rows of ``tqs``: one per query with single-token options, else one per option."""
    rows: list[Row] = []
    for qi, tq in enumerate(tqs):
        if tq.single_token:
            rows.append(Row(qi, tq.context_ids, tq.answer_pos, None))
        else:
            for j, cont in enumerate(tq.option_ids):
                rows.append(Row(qi, tq.context_ids + cont[:-1], tq.answer_pos, j))
    return rows


def row_count(tq: TokenizedQuery) -> int:
    """How many forward rows a query costs."""
    return 1 if tq.single_token else len(tq.option_ids)
