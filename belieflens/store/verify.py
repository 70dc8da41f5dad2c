"""``belieflens info --verify``: re-check a cache file's internal consistency.

First reads every chunk of every variable: a chunk failing its checksum is
refused with one line (:class:`~belieflens.errors.CacheFileError`). Then reads
the file slab by slab (flat memory) with h5py and reports one line per
kind of problem: bookkeeping (status, ``complete`` flags, study fingerprint),
index ranges, non-finite read-outs, option log-probs above 0, oracle rows not
summing to 1, full log-probs not normalised or disagreeing with the option
log-probs. Works on finished and partial files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from belieflens.store.file import REQUIRED, SCHEMA_VERSION, partial_path
from belieflens.store.integrity import verify_file

LOGPROB_TOL = 1e-5
"""Largest log-probability accepted above 0 (rounding)."""

SUM_TOL = 1e-6
"""Largest accepted deviation of an oracle row's sum from 1."""


@dataclass
class _Tally:
    """Accumulates the rows failing one check (an accumulator: mutable)."""

    message: str
    count: int = 0
    first: int = -1

    def add(self, bad: np.ndarray, start: int) -> None:
        rows = np.flatnonzero(bad)
        if rows.size:
            if self.first < 0:
                self.first = start + int(rows[0])
            self.count += int(rows.size)


@dataclass
class _Checks:
    tallies: dict[str, _Tally] = field(default_factory=dict)

    def tally(self, key: str, message: str) -> _Tally:
        return self.tallies.setdefault(key, _Tally(message))

    def lines(self) -> list[str]:
        return [f"{t.message}: {t.count} rows (first: query {t.first})"
                for t in self.tallies.values() if t.count]


def _slabs(n: int, row_bytes: int, budget: int = 1 << 26) -> Iterator[tuple[int, int]]:
    step = max(1, budget // max(row_bytes, 1))
    for a in range(0, n, step):
        yield a, min(a + step, n)


def _text(v: object) -> str:
    if isinstance(v, np.ndarray) and v.size == 1:
        v = v.reshape(-1)[0]
    return v.decode() if isinstance(v, bytes) else str(v)


def verify(path: str | Path) -> list[str]:
    """Problems found in the cache file ``path`` (one line each); empty if consistent.

    If ``path`` does not exist but ``<path>.partial`` does, the partial file is checked.
    First every chunk of every variable is read and checked against its checksum
    (:func:`belieflens.store.integrity.check_file`): damaged data raises
    :class:`~belieflens.errors.CacheFileError` with one line naming the file, each damaged
    variable and its rows, and is not checked further. ``belieflens.verify`` is this function
    (``belieflens info --verify``).

    Args:
        path: a cache file (or the partial file of an interrupted run).

    Returns:
        One line per problem found (no dims: plain text); ``[]`` for a consistent file.

    Examples:
        >>> belieflens.verify("study.h5")
        []
    """
    p = Path(path)
    if not p.exists() and partial_path(p).exists():
        p = partial_path(p)
    if not p.is_file():
        return [f"{p}: no such file"]
    try:
        if not h5py.is_hdf5(p):
            return [f"{p}: not an HDF5 file"]
        verify_file(p)
        with h5py.File(p, "r") as h:
            return _verify(h)
    except (OSError, KeyError, ValueError, RuntimeError, TypeError, IndexError,
            UnicodeDecodeError) as e:
        lines = str(e).strip().splitlines()
        return [f"{p}: corrupt or unreadable ({lines[0] if lines else type(e).__name__})"]


def _verify(h: h5py.File) -> list[str]:
    out: list[str] = []
    version = h.attrs.get("schema_version")
    if version is None or int(np.asarray(version).reshape(-1)[0]) != SCHEMA_VERSION:
        out.append(f"schema_version is {version!r}, expected {SCHEMA_VERSION}")
    missing = [v for v in (*REQUIRED, "complete", "n_outcome") if v not in h]
    if missing:
        return [*out, f"missing variables: {', '.join(missing)}"]
    status = _text(h.attrs.get("status", ""))
    complete = np.asarray(h["complete"][...])
    n = complete.size
    n_done = int((complete == 1).sum())
    if status != "complete":
        out.append(f"status is {status!r}: {n_done} of {n} read-outs complete")
    elif n_done != n:
        out.append(f"status is complete but only {n_done} of {n} rows are marked complete")
    if not np.isin(complete, (0, 1)).all():
        out.append("complete holds values other than 0 and 1")
    out.extend(_check_study(h))
    checks = _Checks()
    row_bytes = int(np.prod(h["resid"].shape[1:])) * h["resid"].dtype.itemsize
    if "logprobs" in h:
        row_bytes += int(h["logprobs"].shape[1]) * 4
    for a, b in _slabs(n, row_bytes):
        _check_slab(h, checks, a, b, complete[a:b] == 1)
    return out + checks.lines()


def _check_slab(h: h5py.File, checks: _Checks, a: int, b: int, done: np.ndarray) -> None:
    """Tally the problems of rows ``[a, b)`` (``done``: which of them are complete)."""
    n_out = h["outcome_label"].shape[1]
    k = np.asarray(h["n_outcome"][a:b])
    checks.tally("k", f"n_outcome outside [1, {n_out}]").add((k < 1) | (k > n_out), a)
    kk = np.clip(k, 1, n_out)[:, None]
    outcome = np.asarray(_var(h, "outcome")[a:b])
    checks.tally("outcome", "outcome outside [-1, n_outcome)").add(
        ((outcome < -1) | (outcome >= kk)).any(1), a)
    _check_positions(h, checks, a, b)
    option_ids = np.asarray(h["option_ids"][a:b])
    present = option_ids[:, :, 0] >= 0
    _check_oracle(h, checks, a, b, kk)
    resid = np.asarray(h["resid"][a:b], dtype=np.float32)
    finite = np.isfinite(resid).reshape(b - a, -1).all(1)
    checks.tally("resid", "resid non-finite in complete rows").add(done & ~finite, a)
    lp = np.asarray(h["option_logprob"][a:b], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        checks.tally("lp_nan", "option_logprob non-finite for a present option").add(
            done & (present & ~np.isfinite(lp)).any(1), a)
        checks.tally("lp_pos", f"option_logprob above 0 (+{LOGPROB_TOL:g})").add(
            done & (present & (lp > LOGPROB_TOL)).any(1), a)
    if "answer_lse" in h:
        lse = np.asarray(h["answer_lse"][a:b])
        checks.tally("lse", "answer_lse non-finite").add(done & ~np.isfinite(lse), a)
    if "logprobs" in h:
        _check_logprobs(h, checks, a, b, done, option_ids, lp)


def _check_positions(h: h5py.File, checks: _Checks, a: int, b: int) -> None:
    """Answer positions, the token there, and lens indices of rows ``[a, b)``."""
    n_tok = h["input_ids"].shape[1]
    pos = np.asarray(h["answer_pos"][a:b])
    checks.tally("pos", f"answer_pos outside [0, {n_tok})").add((pos < 0) | (pos >= n_tok), a)
    ids = np.asarray(h["input_ids"][a:b])
    rows = np.arange(b - a)
    at = ids[rows, np.clip(pos, 0, n_tok - 1)]
    checks.tally("ids", "input_ids padding (-1) at or before answer_pos").add(at < 0, a)
    if "option_lens_index" in h and "lens_token_id" in h:
        n_lens = h["lens_token_id"].shape[0]
        li = np.asarray(h["option_lens_index"][a:b])
        checks.tally("lens", f"option_lens_index outside [-1, {n_lens})").add(
            ((li < -1) | (li >= n_lens)).reshape(b - a, -1).any(1), a)


def _check_oracle(h: h5py.File, checks: _Checks, a: int, b: int, kk: Any) -> None:
    """Oracle rows of ``[a, b)``: finite non-negative, summing to 1, NaN past ``n_outcome``."""
    n_out = h["outcome_label"].shape[1]
    oracle = np.asarray(h["oracle"][a:b], dtype=np.float64)
    has = ~np.isnan(oracle).all(1)
    cols = np.arange(n_out)[None, :] < kk
    inside = np.where(cols, oracle, 0.0)
    bad_vals = has & (cols & ~(np.isfinite(oracle) & (oracle >= 0))).any(1)
    checks.tally("oracle_val", "oracle holds negative or non-finite probabilities").add(
        bad_vals, a)
    with np.errstate(invalid="ignore"):
        bad_sum = has & ~bad_vals & (np.abs(inside.sum(1) - 1.0) > SUM_TOL)
    checks.tally("oracle_sum", f"oracle rows not summing to 1 (±{SUM_TOL:g})").add(bad_sum, a)
    checks.tally("oracle_pad", "oracle values past n_outcome").add(
        has & (~cols & ~np.isnan(oracle)).any(1), a)


def _check_logprobs(
    h: h5py.File, checks: _Checks, a: int, b: int, done: np.ndarray, option_ids: np.ndarray,
    lp: np.ndarray,
) -> None:
    """Full log-probs of rows ``[a, b)``: normalised, and agreeing with single-token options."""
    present = option_ids[:, :, 0] >= 0
    full = np.asarray(h["logprobs"][a:b], dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        norm = np.log(np.exp(full).sum(1))
        checks.tally("full_norm", "logprobs not normalised").add(
            done & ~(np.abs(norm) < 1e-3), a)
        single = present & (option_ids[:, :, 1:] < 0).all(2) if option_ids.shape[2] > 1 \
            else present
        tok = np.clip(option_ids[:, :, 0], 0, full.shape[1] - 1)
        direct = np.take_along_axis(full, tok, 1)
        checks.tally("full_opt", "option_logprob disagrees with logprobs").add(
            done & (single & ~(np.abs(direct - lp) < 1e-3)).any(1), a)


def _var(h: h5py.File, name: str) -> h5py.Dataset:
    """A variable by its netCDF name (one named like a dimension is stored under a prefix)."""
    hidden = f"_nc4_non_coord_{name}"
    ds: h5py.Dataset = h[hidden] if hidden in h else h[name]
    return ds


def _check_study(h: h5py.File) -> list[str]:
    from belieflens.store.fingerprint import FINGERPRINT_ATTR, STUDY_ATTR, fingerprint

    if STUDY_ATTR not in h.attrs:
        return []
    try:
        study = json.loads(_text(h.attrs[STUDY_ATTR]))
    except ValueError:
        return ["study attribute is not valid JSON"]
    if _text(h.attrs.get(FINGERPRINT_ATTR, "")) != fingerprint(study):
        return ["study_fingerprint does not match the study attribute"]
    if "sizes" in study and study["sizes"].get("query") != h["complete"].shape[0]:
        return ["study sizes disagree with the file's query dimension"]
    return []
