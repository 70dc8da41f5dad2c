"""Test helper: a synthetic cache Dataset with the read-out variables analysis sections use.

No model and no residuals: rows carry option log-probs built from a chosen
belief plus a per-position bias, so the debiased belief is known exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.episodes.latin import latin_square


@dataclass(frozen=True)
class Row:
    """One synthetic read-out."""

    episode: int
    turn: int
    probe: str
    delivery: str
    rotation: int
    logprob: tuple[float, ...]
    outcome: tuple[int, ...]
    labels: tuple[str, ...]
    oracle: tuple[float, ...] | None = None
    truth: Mapping[str, float | str] = field(default_factory=dict)


def mcq_rows(
    belief: Sequence[float] | NDArray[np.float64],
    *,
    episode: int,
    turn: int,
    probe: str,
    labels: Sequence[str],
    delivery: str = "single-turn",
    oracle: Sequence[float] | NDArray[np.float64] | None = None,
    truth: Mapping[str, float | str] | None = None,
    bias: Sequence[float] | None = None,
) -> list[Row]:
    """One row per Latin-square rotation whose geometric debiasing gives ``belief`` exactly."""
    k = len(belief)
    b = np.zeros(k) if bias is None else np.asarray(bias, dtype=np.float64)
    square = latin_square(k)
    rows = []
    for r in range(k):
        lp = np.log(np.asarray(belief, dtype=np.float64)[square[r]]) + b
        lp = lp - np.log(np.exp(lp).sum())
        rows.append(Row(episode, turn, probe, delivery, r, tuple(float(x) for x in lp),
                        tuple(int(o) for o in square[r]), tuple(labels),
                        None if oracle is None else tuple(oracle), dict(truth or {})))
    return rows


def cache_dataset(rows: Sequence[Row], attrs: Mapping[str, object] | None = None) -> xr.Dataset:
    """The rows as a cache-like Dataset on dimension ``query`` (truth as ``truth_<key>``)."""
    n = len(rows)
    n_opt = max(len(r.logprob) for r in rows)
    n_out = max(len(r.labels) for r in rows)
    lp = np.full((n, n_opt), np.nan)
    outcome = np.full((n, n_opt), -1, dtype=np.int32)
    labels = np.full((n, n_out), "", dtype=object)
    oracle = np.full((n, n_out), np.nan)
    for i, r in enumerate(rows):
        lp[i, : len(r.logprob)] = r.logprob
        outcome[i, : len(r.outcome)] = r.outcome
        labels[i, : len(r.labels)] = r.labels
        if r.oracle is not None:
            oracle[i, : len(r.oracle)] = r.oracle
    data: dict[str, object] = {
        "option_logprob": (("query", "option"), lp),
        "outcome": (("query", "option"), outcome),
        "outcome_label": (("query", "outcome"), labels.astype(str)),
        "oracle": (("query", "outcome"), oracle),
        "n_outcome": (("query",), np.array([len(r.labels) for r in rows], dtype=np.int32)),
    }
    keys = sorted({k for r in rows for k in r.truth})
    for k in keys:
        vals = [r.truth.get(k) for r in rows]
        if any(isinstance(v, str) for v in vals):
            data[f"truth_{k}"] = (("query",), np.array([str(v or "") for v in vals], dtype=str))
        else:
            data[f"truth_{k}"] = (("query",), np.array(
                [np.nan if v is None else float(v) for v in vals]))
    coords = {
        "episode": ("query", [r.episode for r in rows]),
        "turn": ("query", [r.turn for r in rows]),
        "rotation": ("query", [r.rotation for r in rows]),
        "probe": ("query", [r.probe for r in rows]),
        "delivery": ("query", [r.delivery for r in rows]),
    }
    return xr.Dataset(data, coords=coords, attrs=dict(attrs or {}))
