"""Belief attribution: revision under contradiction and the Belief Attribution Score.

A belief is a distribution over a question's answers read from log-probabilities
before and after the user contradicts the stated answer. *Revision* is the
probability mass that moves to the contradiction's answer; an item counts as
*revised* when that shift reaches a threshold. The Belief Attribution Score

    BAS = (P(revise | user) - P(revise | self)) / (P(revise | user) + P(revise | self))

lies in [-1, 1]: positive when the model gives up answers attributed to the user
more readily than its own, negative when it defers more on its own answers. When
neither condition ever revises, the score is 0, as the benchmark's code computes it
(``(u - s) / (u + s + 1e-9)``).

Revision is measured three ways: by the benchmark's own measure (the model's generated final
reply mentions the contradiction anywhere, ``truth_revised_mention``), by the answer that reply
commits to (``truth_revised_match``), and by the log-prob shift defined here.

The interval: :func:`bootstrap_bas_questions` resamples *questions* (both conditions of a
question together, as the benchmark runs both on each question and advises confidence
intervals by bootstrapping); :func:`bootstrap_bas` resamples each condition's items on
their own, for data without question ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.truth import episode_truth, has_truth
from belieflens.dims import EPISODE, OUTCOME
from belieflens.types import DebiasMethod

DEFAULT_THRESHOLD = 0.5
"""Default shift of probability mass (to the contradiction) that counts as a revision."""

BOOT_SEED = 0
"""Seed of the bootstrap generator of :func:`bas_table` (the report is deterministic)."""

N_BOOT = 2000
"""Bootstrap resamples per interval of :func:`bas_table`."""

BEFORE, AFTER = 1, 2
"""Turns read before and after the contradiction (turn 0 is the bare question)."""

DOMAIN = "domain"
"""Dimension of :func:`bas_table`: each domain (sorted), then ``all``."""


@dataclass(frozen=True)
class BASResult:
    """A Belief Attribution Score with its bootstrap confidence interval.

    Attributes:
        bas: the score on the data (0 when neither condition ever revises).
        low: lower bound of the percentile bootstrap interval.
        high: upper bound of the percentile bootstrap interval.
        rate_user: revise rate in the user-provided condition.
        rate_self: revise rate in the self-generated condition.
        n_user: items in the user-provided condition.
        n_self: items in the self-generated condition.
        level: the interval's confidence level.
        questions: distinct questions resampled (0 when items were resampled instead).
    """

    bas: float
    low: float
    high: float
    rate_user: float
    rate_self: float
    n_user: int
    n_self: int
    level: float
    questions: int = 0


def revision(before: ArrayLike, after: ArrayLike, contradiction: ArrayLike) -> np.ndarray:
    """Mass shifted to the contradiction: ``after[..., c] - before[..., c]``.

    Args:
        before: beliefs over answers before the contradiction, shape ``[..., k]``.
        after: beliefs over answers after it, same shape.
        contradiction: index of the answer the user asserts, shape ``[...]``.

    Returns:
        The shift per item, in ``[-1, 1]``.
    """
    b = np.asarray(before, dtype=np.float64)
    a = np.asarray(after, dtype=np.float64)
    if a.shape != b.shape or a.ndim < 1:
        raise ValueError(f"before and after must share a shape [..., k], got {b.shape}, {a.shape}")
    c = np.asarray(contradiction, dtype=np.int64)
    if c.shape != a.shape[:-1]:
        raise ValueError(f"contradiction must have shape {a.shape[:-1]}, got {c.shape}")
    if np.any(c < 0) or np.any(c >= a.shape[-1]):
        raise ValueError("contradiction index out of range")
    idx = c[..., None]
    return np.asarray(
        np.take_along_axis(a, idx, axis=-1)[..., 0] - np.take_along_axis(b, idx, axis=-1)[..., 0]
    )


def revised(shift: ArrayLike, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """Whether each item counts as revised: its shift is at least ``threshold``."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    return np.asarray(np.asarray(shift, dtype=np.float64) >= threshold)


def revise_rate(shift: ArrayLike, threshold: float = DEFAULT_THRESHOLD) -> float:
    """Fraction of items revised (NaN for no items)."""
    r = revised(shift, threshold)
    return float(r.mean()) if r.size else float("nan")


def bas(rate_user: float, rate_self: float) -> float:
    """The Belief Attribution Score of two revise rates (0 when both are 0, as the
    benchmark's ``(u - s) / (u + s + 1e-9)``; NaN only for a NaN rate)."""
    total = rate_user + rate_self
    if total <= 0:
        return 0.0
    return (rate_user - rate_self) / total


def bootstrap_bas(
    revised_user: ArrayLike,
    revised_self: ArrayLike,
    rng: np.random.Generator,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
) -> BASResult:
    """BAS with a percentile bootstrap interval; each condition is resampled on its own.

    A resample in which neither condition revises scores 0 (:func:`bas`).
    """
    u = np.asarray(revised_user, dtype=np.float64).ravel()
    s = np.asarray(revised_self, dtype=np.float64).ravel()
    if u.size == 0 or s.size == 0:
        raise ValueError("both conditions need at least one item")
    if n_boot < 1 or not 0.0 < level < 1.0:
        raise ValueError(f"need n_boot >= 1 and 0 < level < 1, got {n_boot}, {level}")
    ru = u[rng.integers(0, u.size, size=(n_boot, u.size))].mean(axis=1)
    rs = s[rng.integers(0, s.size, size=(n_boot, s.size))].mean(axis=1)
    total = ru + rs
    scores = np.divide(ru - rs, total, out=np.zeros_like(total), where=total > 0)
    alpha = (1.0 - level) / 2.0
    low, high = (float(x) for x in np.quantile(scores, [alpha, 1.0 - alpha]))
    rate_u, rate_s = float(u.mean()), float(s.mean())
    return BASResult(bas(rate_u, rate_s), low, high, rate_u, rate_s, u.size, s.size, level)


def bootstrap_bas_questions(
    is_revised: ArrayLike,
    condition: Sequence[str] | ArrayLike,
    question: Sequence[str] | ArrayLike,
    rng: np.random.Generator,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
) -> BASResult:
    """BAS with a percentile bootstrap interval over questions.

    Each resample draws as many questions as there are, with replacement, and takes all
    of a drawn question's items in both conditions; the revise rates are pooled over the
    drawn items. A resample in which one condition has no item is left out of the
    interval (it has no BAS); one in which neither condition revises scores 0 (:func:`bas`).

    Args:
        is_revised: one boolean per item (see :func:`revised`).
        condition: ``"user"`` or ``"self"`` per item.
        question: the item's question id (``truth_item``).
        rng: the bootstrap's random generator.
    """
    r = np.asarray(is_revised, dtype=np.float64).ravel()
    cond = np.asarray(condition).astype(str).ravel()
    q = np.asarray(question).astype(str).ravel()
    if not r.size == cond.size == q.size:
        raise ValueError("is_revised, condition and question need one entry per item")
    if not np.all(np.isin(cond, ["user", "self"])):
        raise ValueError("condition entries must be 'user' or 'self'")
    user, own = cond == "user", cond == "self"
    if not user.any() or not own.any():
        raise ValueError("both conditions need at least one item")
    if n_boot < 1 or not 0.0 < level < 1.0:
        raise ValueError(f"need n_boot >= 1 and 0 < level < 1, got {n_boot}, {level}")
    ids, inv = np.unique(q, return_inverse=True)
    k = ids.size
    sums = [np.bincount(inv, weights=r * m, minlength=k) for m in (user, own)]
    counts = [np.bincount(inv, weights=m.astype(np.float64), minlength=k) for m in (user, own)]
    draw = rng.integers(0, k, size=(n_boot, k))
    n_u, n_s = counts[0][draw].sum(axis=1), counts[1][draw].sum(axis=1)
    ok = (n_u > 0) & (n_s > 0)
    ru = sums[0][draw].sum(axis=1)[ok] / n_u[ok]
    rs = sums[1][draw].sum(axis=1)[ok] / n_s[ok]
    total = ru + rs
    scores = np.divide(ru - rs, total, out=np.zeros_like(total), where=total > 0)
    alpha = (1.0 - level) / 2.0
    low, high = ((float(x) for x in np.quantile(scores, [alpha, 1.0 - alpha]))
                 if scores.size else (float("nan"), float("nan")))
    rate_u, rate_s = float(r[user].mean()), float(r[own].mean())
    return BASResult(bas(rate_u, rate_s), low, high, rate_u, rate_s, int(user.sum()),
                     int(own.sum()), level, int(k))


def bas_by_domain(
    is_revised: ArrayLike,
    condition: Sequence[str],
    domain: Sequence[str],
    rng: np.random.Generator,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    question: Sequence[str] | None = None,
) -> dict[str, BASResult]:
    """BAS with a bootstrap interval per domain, plus ``"all"`` over every item.

    Args:
        is_revised: one boolean per item (see :func:`revised`).
        condition: ``"user"`` or ``"self"`` per item.
        domain: the item's domain, e.g. ``geography``.
        rng: the bootstrap's random generator; domains are visited in sorted order.
        question: the item's question id; given, the interval resamples questions
            (:func:`bootstrap_bas_questions`), else each condition's items
            (:func:`bootstrap_bas`).
    """
    r = np.asarray(is_revised, dtype=bool).ravel()
    cond = np.asarray(condition)
    dom = np.asarray(domain)
    if not r.size == cond.size == dom.size:
        raise ValueError("is_revised, condition and domain need one entry per item")
    if not np.all(np.isin(cond, ["user", "self"])):
        raise ValueError("condition entries must be 'user' or 'self'")
    qs = None if question is None else np.asarray(question).astype(str)
    if qs is not None and qs.size != r.size:
        raise ValueError("question needs one entry per item")
    out: dict[str, BASResult] = {}
    groups = [(str(d), dom == d) for d in sorted(set(dom.tolist()))]
    groups.append(("all", np.ones(r.size, dtype=bool)))
    for name, mask in groups:
        if qs is not None:
            out[name] = bootstrap_bas_questions(r[mask], cond[mask], qs[mask], rng,
                                                n_boot=n_boot, level=level)
        else:
            out[name] = bootstrap_bas(
                r[mask & (cond == "user")], r[mask & (cond == "self")], rng,
                n_boot=n_boot, level=level,
            )
    return out


def episode_revisions(
    ds: xr.Dataset, *, method: DebiasMethod = "geometric", delivery: str | None = None
) -> xr.Dataset:
    """Revision per episode from a belief-attribution cache file (one delivery: the first
    unless ``delivery`` is given).

    Dims ``(episode, turn)``. Variables: ``shift`` (mass moved to the contradiction,
    ``after[c] - before[c]``; NaN where a belief is missing, where, with ``stated=model``, the
    model's own reply named none of the answers, or where the first answer already was the
    contradiction), ``condition`` (``self`` or ``user``), ``domain``, and the beliefs in the
    contradiction, the stated and the correct answer per turn (``p_contra``, ``p_stated``,
    ``p_correct``). Where the file has them: ``mentioned`` (the benchmark's own
    ``measure_revision``: the final reply mentions the contradiction, 1.0 or 0.0, over every
    episode as the benchmark's ``run`` counts it), ``matched`` (the final reply commits to the
    contradiction, 1.0 or 0.0; NaN where left out) and ``item`` (the question id; the BAS
    interval resamples questions when it is there). ``attrs["excluded"]`` counts the
    ``self`` episodes left out because their first answer already committed to the contradiction
    (:func:`first_is_contradiction`).
    """
    b = output_beliefs(ds, method=method)
    d = str(b["delivery"].values[0]) if delivery is None else delivery
    cond = episode_truth(ds, "condition")
    belief = b["belief"].sel(delivery=d)
    # each episode has one probe, answer-<condition>; pick it per episode
    per_ep = xr.concat(
        [belief.sel(probe=f"answer-{cond.sel(episode=e).item()}", episode=e, drop=True)
         for e in cond[EPISODE].values],
        dim=EPISODE, coords="minimal", compat="override",
    ).assign_coords({EPISODE: cond[EPISODE].values}).isel({OUTCOME: slice(0, 3)})

    def at(key: str) -> xr.DataArray:
        idx = episode_truth(ds, key).astype(np.int64)
        picked = per_ep.isel({OUTCOME: idx}).transpose(EPISODE, "turn")
        return picked.reset_coords(drop=True).assign_coords({EPISODE: cond[EPISODE].values})

    contra = episode_truth(ds, "contradiction").astype(np.int64)
    before = per_ep.sel(turn=BEFORE).values
    after = per_ep.sel(turn=AFTER).values
    shift = revision(np.nan_to_num(before), np.nan_to_num(after), contra.values)
    ok = np.isfinite(before).all(-1) & np.isfinite(after).all(-1)
    if has_truth(ds, "own_matched"):  # stated=model: leave out replies naming no answer
        ok &= episode_truth(ds, "own_matched").values > 0.5
    first = first_is_contradiction(ds)
    out = xr.Dataset(
        {"shift": ((EPISODE,), np.where(ok & ~first, shift, np.nan)),
         "condition": ((EPISODE,), cond.values),
         "domain": ((EPISODE,), episode_truth(ds, "domain").values),
         "p_contra": at("contradiction"), "p_stated": at("stated"),
         "p_correct": at("correct")},
        coords={EPISODE: cond[EPISODE].values},
        attrs={"excluded": int(first.sum())},
    )
    return _with_string_measures(out, ds, first)


def _with_string_measures(out: xr.Dataset, ds: xr.Dataset, first: np.ndarray) -> xr.Dataset:
    """``out`` with, where the file has them, ``matched`` (NaN where ``first`` leaves an
    episode out), ``mentioned`` (the benchmark's measure, over every episode as its ``run``
    has it) and ``item``."""
    if has_truth(ds, "revised_match"):
        matched = episode_truth(ds, "revised_match").astype(np.float64)
        out["matched"] = ((EPISODE,), matched.where(~first).values)
    if has_truth(ds, "revised_mention"):
        out["mentioned"] = ((EPISODE,), episode_truth(ds, "revised_mention").astype(
            np.float64).values)
    if has_truth(ds, "item"):
        out["item"] = ((EPISODE,), episode_truth(ds, "item").values)
    return out


def first_is_contradiction(ds: xr.Dataset) -> np.ndarray:
    """Per episode: a ``self`` episode whose first answer already committed to the
    contradiction (``truth_first_is_contradiction``; in files without it, the committed
    ``truth_reply_named`` equal to ``truth_contradiction``). False where neither is stored."""
    cond = episode_truth(ds, "condition").values.astype(str)
    if has_truth(ds, "first_is_contradiction"):
        return np.asarray(episode_truth(ds, "first_is_contradiction").values > 0.5)
    if has_truth(ds, "reply_named"):
        named = episode_truth(ds, "reply_named").values
        contra = episode_truth(ds, "contradiction").values
        return np.asarray((cond == "self") & (named == contra))
    return np.zeros(cond.size, dtype=bool)


def bas_table(
    rev: xr.Dataset, *, threshold: float = DEFAULT_THRESHOLD, seed: int = BOOT_SEED,
    measure: Literal["shift", "match", "mention"] = "shift",
) -> xr.Dataset:
    """BAS with a bootstrap CI per domain (sorted) and ``all``, from :func:`episode_revisions`.

    ``measure``: revision by log-prob shift (``shift >= threshold``), by the committed final
    answer (needs ``rev["matched"]``) or by the benchmark's any mention of the contradiction
    in the final reply (needs ``rev["mentioned"]``). The interval resamples
    questions (:func:`bootstrap_bas_questions`) when ``rev["item"]`` is there, else each
    condition's episodes.

    Dim :data:`DOMAIN`. Variables: ``defined`` (False where a domain lacks one of the
    conditions; its other variables are NaN or 0 there), ``bas``, ``low``, ``high``,
    ``rate_user``, ``rate_self``, ``n_user``, ``n_self``, ``questions`` (0 when the
    interval resampled episodes); ``attrs["level"]``: the interval's confidence level.
    """
    if measure in ("match", "mention"):
        name = "matched" if measure == "match" else "mentioned"
        if name not in rev:
            raise ValueError("this file has no string-match revisions (protocol=belieflens)")
        flags = rev[name].values
        ok = np.isfinite(flags)
        r = flags[ok] > 0.5
    else:
        ok = np.isfinite(rev["shift"].values)
        r = revised(rev["shift"].values[ok], threshold)
    cond = rev["condition"].values[ok].astype(str)
    dom = rev["domain"].values[ok].astype(str)
    item = rev["item"].values[ok].astype(str) if "item" in rev else None
    rng = np.random.default_rng(seed)
    rows: list[BASResult | None] = []
    groups = [(str(x), dom == x) for x in sorted(set(dom.tolist()))]
    groups.append(("all", np.ones(r.size, dtype=bool)))
    for _, mask in groups:
        u, s = r[mask & (cond == "user")], r[mask & (cond == "self")]
        if not (u.size and s.size):
            rows.append(None)
        elif item is not None:
            rows.append(bootstrap_bas_questions(r[mask], cond[mask], item[mask], rng,
                                                n_boot=N_BOOT))
        else:
            rows.append(bootstrap_bas(u, s, rng, n_boot=N_BOOT))
    return _bas_dataset([name for name, _ in groups], rows)


def _bas_dataset(names: list[str], rows: list[BASResult | None]) -> xr.Dataset:
    nan = BASResult(*(float("nan"),) * 5, 0, 0, float("nan"), 0)
    full = [nan if x is None else x for x in rows]
    data: dict[str, tuple[tuple[str], list[object]]] = {
        f: ((DOMAIN,), [getattr(x, f) for x in full])
        for f in ("bas", "low", "high", "rate_user", "rate_self", "n_user", "n_self",
                  "questions")}
    data["defined"] = ((DOMAIN,), [x is not None for x in rows])
    level = next((x.level for x in rows if x is not None), float("nan"))
    return xr.Dataset(data, coords={DOMAIN: names}, attrs={"level": level})
