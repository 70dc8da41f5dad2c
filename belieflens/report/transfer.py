"""The sections of ``belieflens analyze --transfer`` and ``--own-answer``: decoders that a bag
of tokens cannot pass (:mod:`belieflens.analysis.transfer`,
:mod:`belieflens.analysis.own_answer`), each beside its untrained floor where the study has
controls (``--floor``), as text, a figure and Markdown."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np
import xarray as xr

from belieflens.analysis.baselines import Statistics
from belieflens.analysis.floor import check_floor
from belieflens.analysis.own_answer import own_answer_floor, own_answer_values
from belieflens.analysis.transfer import (
    Condition,
    condition_label,
    pair_controls,
    transfer_floor,
    transfer_values,
)
from belieflens.dims import BASELINE, LAYER
from belieflens.errors import ParameterError
from belieflens.report.floor import floor_section
from belieflens.report.section import Section
from belieflens.store.cache import open_cache
from belieflens.types import DebiasMethod

OWN_TITLE = "Own-answer decoders: where the model's own answer forms"

StatisticsFor = Callable[[xr.Dataset], Statistics]


@dataclass(frozen=True)
class DecoderChecks:
    """What ``analyze`` runs beyond the decoders of the oracle: transfers and the own-answer
    decoders.

    ``transfers``: test files of the study's transfers (the study's decoders fitted on it,
    scored on each); ``transfer_floors``: those files' untrained controls, each matched to
    its file by study and to the study's ``--floor`` control of the same network;
    ``delivery``: ``(train, test)`` deliveries (with no ``transfers``: a transfer within the
    study from one delivery to the other; with them: the deliveries of both sides);
    ``own_answer``: decode the model's own answer."""

    transfers: tuple[Path, ...] = ()
    transfer_floors: tuple[Path, ...] = ()
    delivery: tuple[str, str] | None = None
    own_answer: bool = False

    @property
    def any(self) -> bool:
        """Whether there is anything to run."""
        return bool(self.transfers or self.delivery or self.own_answer)

    def check(self, study: xr.Dataset, floors: Sequence[Path]) -> None:
        """One line before any work: a transfer file that is missing, a control of none of
        them, a control without its pair among the study's, or ``--transfer-floor`` without
        ``--floor``."""
        if self.transfer_floors and not floors:
            raise ParameterError("--transfer-floor needs --floor: the study's untrained "
                                 "controls, paired with the test files' by network")
        for opt, paths in (("--transfer", self.transfers),
                           ("--transfer-floor", self.transfer_floors)):
            for p in paths:
                if not Path(p).exists():
                    raise ParameterError(f"option '{opt}' = '{p}' is not allowed: no such file")
        with ExitStack() as stack:
            tests = [stack.enter_context(open_cache(p)) for p in self.transfers]
            ctl = [(os.fspath(p), stack.enter_context(open_cache(p))) for p in floors]
            theirs = [(os.fspath(p), stack.enter_context(open_cache(p)))
                      for p in self.transfer_floors]
            train, test_delivery = self.delivery or (None, None)
            Condition(study, train).check("training")
            for test, mine in zip(tests, self._assign(tests, theirs), strict=True):
                Condition(test, test_delivery).check("test")
                if ctl:
                    pair_controls(Condition(study), Condition(test), ctl, mine)
            if not tests:
                Condition(study, test_delivery).check("test")

    def _assign(self, tests: Sequence[xr.Dataset], controls: Sequence[tuple[str, xr.Dataset]]
                ) -> list[list[tuple[str, xr.Dataset]]]:
        """Each test file's controls: those of its study (one line for a control of none)."""
        out: list[list[tuple[str, xr.Dataset]]] = [[] for _ in tests]
        for name, c in controls:
            owner = [i for i, t in enumerate(tests) if _same_study(t, c, name)]
            if not owner:
                raise ParameterError(f"--transfer-floor {name} is a control of none of the "
                                     "--transfer files (another study)")
            out[owner[0]].append((name, c))
        return out

    def sections(self, study: xr.Dataset, floors: Sequence[Path], out: Path | None, *,
                 mine: Statistics, statistics: StatisticsFor, seed: int,
                 method: DebiasMethod) -> list[Section]:
        """Each transfer's section, then the own-answer decoders' (``mine``: the study's
        statistic features, ``statistics``: a test file's)."""
        with ExitStack() as stack:
            ctl = [(os.fspath(p), stack.enter_context(open_cache(p))) for p in floors]
            tests = [stack.enter_context(open_cache(p)) for p in self.transfers]
            theirs = [(os.fspath(p), stack.enter_context(open_cache(p)))
                      for p in self.transfer_floors]
            done = [_transfer_section(a, b, ctl, c, out, seed)
                    for a, b, c in self._conditions(study, mine, tests, theirs, statistics)]
            if self.own_answer:
                done.append(_own_section(study, ctl, out, seed=seed, method=method,
                                         statistics=mine))
        return done

    def _conditions(self, study: xr.Dataset, mine: Statistics, tests: Sequence[xr.Dataset],
                    theirs: Sequence[tuple[str, xr.Dataset]], statistics: StatisticsFor
                    ) -> Iterator[tuple[Condition, Condition, list[tuple[str, xr.Dataset]]]]:
        train, test = self.delivery or (None, None)
        if self.delivery is not None and not tests:
            yield Condition(study, train, mine), Condition(study, test, mine), []
        for t, c in zip(tests, self._assign(tests, theirs), strict=True):
            yield Condition(study, train, mine), Condition(t, test, statistics(t)), c


NO_CHECKS = DecoderChecks()
"""Nothing beyond the decoders of the oracle."""


class AnalyzeMore(TypedDict, total=False):
    """What :func:`belieflens.report.analysis.analyze` runs and writes beyond its tables."""

    checks: DecoderChecks
    """The decoders a bag of tokens cannot pass (default: none)."""
    results: str | None
    """Also write every comparison beside the controls (the floor's sources, each
    transfer's, the own answer's) as the results file ``docs/results/NAME.md``
    (:mod:`belieflens.results`)."""


class TransferKeywords(TypedDict, total=False):
    """The keywords of :func:`belieflens.analyze` for the decoders a bag of tokens cannot
    pass (:mod:`belieflens.analysis.transfer`, :mod:`belieflens.analysis.own_answer`) and
    its results file."""

    transfers: Sequence[str | os.PathLike[str]]
    """Cache files of other conditions of the study (a paraphrase, random face names, more
    flips: another parameter, the same seed): the study's decoders fitted on it and scored
    on each, beside the same decoder fitted on that condition, the statistic baselines'
    transfer and, with ``floors``, the untrained networks' transfer."""
    transfer_floors: Sequence[str | os.PathLike[str]]
    """The untrained controls of the ``transfers`` files, each paired with the ``floors``
    control of the same network."""
    transfer_delivery: str | None
    """``FROM:TO`` (``multi-turn:single-turn``): the deliveries of a transfer's two sides;
    without ``transfers``, a transfer within the study from one delivery to the other."""
    own_answer: bool
    """Decode the model's own debiased answer from each layer, beside the statistic
    baselines fitted to it and, with ``floors``, the untrained floor."""
    results: str | None
    """Also write every comparison beside the ``floors`` to ``docs/results/NAME.md`` and
    ``.json`` (:mod:`belieflens.results`)."""


def analyze_more(keywords: TransferKeywords) -> AnalyzeMore:
    """:class:`TransferKeywords` as :class:`AnalyzeMore` (one line for a ``transfer_delivery``
    that is not ``FROM:TO``)."""
    spec = keywords.get("transfer_delivery")
    delivery = None
    if spec is not None:
        parts = spec.split(":")
        if len(parts) != 2 or not all(parts):
            raise ParameterError(f"option '--transfer-delivery' = {spec!r} is not allowed: "
                                 "FROM:TO, e.g. multi-turn:single-turn")
        delivery = (parts[0], parts[1])
    checks = DecoderChecks(tuple(Path(f) for f in keywords.get("transfers", ())),
                           tuple(Path(f) for f in keywords.get("transfer_floors", ())),
                           delivery, bool(keywords.get("own_answer", False)))
    return {"checks": checks, "results": keywords.get("results")}


def _same_study(test: xr.Dataset, control: xr.Dataset, name: str) -> bool:
    try:
        check_floor(test.attrs, control.attrs, name)
    except ParameterError:
        return False
    return True


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-")


def _transfer_section(train: Condition, test: Condition,
                      controls: Sequence[tuple[str, xr.Dataset]],
                      test_controls: Sequence[tuple[str, xr.Dataset]], out: Path | None,
                      seed: int) -> Section:
    """One transfer: beside its floor with controls, else its values alone."""
    what = f"transfer {condition_label(train, test)} → {condition_label(test, train)}"
    title = f"Transfer decoders: {condition_label(train, test)} → {condition_label(test, train)}"
    values = transfer_values(train, test, seed=seed)
    if not controls:
        return Section(title=title, text=format_transfer(values), markdown=_md(
            format_transfer(values), "Without untrained controls (`--floor`) there is no floor "
            "beside it."))
    f = transfer_floor(train, test, controls=controls, test_controls=test_controls, seed=seed,
                       values=values)
    sec = floor_section(f, out, title=title, figure=f"transfer-{_slug(what)}.png", what=what)
    note = (f"{TRANSFER_GUIDE}\n\n"
            f"- {_closest_line(values)}\n\n")
    return Section(sec.title, sec.text, note + sec.markdown, sec.files, sec.results)


TRANSFER_GUIDE = (
    "The decoder of the oracle fitted on the training condition (analyze's decoder: the "
    "nested-CV ridge estimator, its folds of whole episodes) scores the test condition's "
    "read-outs, each by the fit that never saw its episode (`transfer`); `within` is the "
    "same decoder fitted on the test condition itself, on the same folds. The floor is the "
    "same transfer between the untrained networks' files of the two conditions, the "
    "baselines each statistic baseline transferred the same way where both conditions "
    "declare it alike. A decoder that reads a bag of the evidence's tokens does not carry "
    "over to other tokens for the same evidence.")


def _closest_line(values: xr.Dataset) -> str:
    """Mean transfer and within TVD at the transfer's best layer."""
    t = values["transfer"].mean([d for d in values["transfer"].dims if d != LAYER])
    w = values["within"].mean([d for d in values["within"].dims if d != LAYER])
    if not np.isfinite(t.values).any():
        return "no layer transfers"
    best = int(np.argmin(np.where(np.isfinite(t.values), t.values, np.inf)))
    return (f"closest layer {best}: transfer TVD {float(t[best]):.4f}, within the test "
            f"condition {float(w[best]):.4f}")


def format_transfer(values: xr.Dataset, *, every: int = 5) -> str:
    """:func:`~belieflens.analysis.transfer.transfer_values` as text: per layer (every
    ``every``-th and the last) the mean transfer and within TVD, and each baseline's."""
    lines = [f"transfer {values.attrs['train']} → {values.attrs['test']}: held-out TVD to the "
             "test condition's oracle, mean over its read-outs"]
    t = values["transfer"].mean([d for d in values["transfer"].dims if d != LAYER])
    w = values["within"].mean([d for d in values["within"].dims if d != LAYER])
    layers = [int(x) for x in t[LAYER].values]
    for la in sorted(set(layers[::every]) | {layers[-1]}):
        lines.append(f"  layer {la:>3}: transfer {float(t.sel({LAYER: la})):.4f}  within "
                     f"{float(w.sel({LAYER: la})):.4f}")
    bt = values["baseline_transfer"].mean([d for d in values["baseline_transfer"].dims
                                           if d != BASELINE])
    bw = values["baseline_within"].mean([d for d in values["baseline_within"].dims
                                         if d != BASELINE])
    for n in bt[BASELINE].values:
        lines.append(f"  baseline {n!s}: transfer {float(bt.sel({BASELINE: n})):.4f}  "
                     f"within {float(bw.sel({BASELINE: n})):.4f}")
    return "\n".join(lines)


def _md(text: str, note: str) -> str:
    return f"{TRANSFER_GUIDE} {note}\n\n```\n{text}\n```\n"


OWN_GUIDE = (
    "The model's own answer (its debiased output belief) decoded from each layer's residual "
    "at the answer position by the same estimator and folds as the decoders of the oracle, "
    "scored by held-out R2 (whole episodes held out). The statistic baselines are fitted to "
    "the same own-answer target: how much of the answer a statistic of the evidence already "
    "explains. The floor decodes the same target (this model's answer) from the untrained "
    "networks' residuals. The answer forms at the first layer beyond both.")


def format_own_answer(values: xr.Dataset, *, every: int = 5) -> str:
    """:func:`~belieflens.analysis.own_answer.own_answer_values` as text: per question the
    held-out R² per layer (every ``every``-th and the last) and each baseline's."""
    lines = ["own answer: held-out R2 of the model's own debiased answer"]
    for p in values["probe"].values:
        r2 = values["r2"].sel(probe=p)
        layers = [int(x) for x in r2[LAYER].values]
        shown = sorted(set(layers[::every]) | {layers[-1]})
        lines.append(f"{p!s}: " + "  ".join(f"L{la}={float(r2.sel({LAYER: la})):.3f}"
                                            for la in shown))
        base = values["baseline_r2"].sel(probe=p)
        lines.append("  baselines: " + " · ".join(
            f"{n!s} {float(base.sel({BASELINE: n})):.3f}" for n in base[BASELINE].values))
    return "\n".join(lines)


def _own_section(study: xr.Dataset, controls: Sequence[tuple[str, xr.Dataset]],
                 out: Path | None, *, seed: int, method: DebiasMethod,
                 statistics: Statistics) -> Section:
    if not controls:
        text = format_own_answer(own_answer_values(study, seed=seed, method=method,
                                                   statistics=statistics))
        return Section(OWN_TITLE, text, f"{OWN_GUIDE}\n\n```\n{text}\n```\n")
    f = own_answer_floor(study, controls, seed=seed, method=method, statistics=statistics)
    sec = floor_section(f, out, title=OWN_TITLE, figure="own-answer.png", what="")
    return Section(sec.title, sec.text, f"{OWN_GUIDE}\n\n{sec.markdown}", sec.files,
                   sec.results)
