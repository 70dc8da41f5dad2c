"""The ``dutch-book`` analysis section: violations, Dutch books and sure losses per scenario.

Read-out: the credence in a question is P(Yes) renormalised over Yes/No and
debiased over both answer orders (see :mod:`belieflens.envs.dutch_book.credence`; the
shipped environment asks an MCQ ``A. Yes`` / ``B. No`` read as the letter, so
there is one option per answer; variant continuations would be summed).

Per scenario (one episode) the credences are put back in the scenario's listed
order and scored twice: the hand construction for its kind
(:func:`belieflens.envs.dutch_book.coherence.scenario_book`) and the general linear
program (:func:`belieflens.envs.dutch_book.coherence.find_book`), which also proves
coherence when no book exists. Summaries per kind and delivery: mean sure loss
± SEM, the rate of *material* violations (hand sure loss above
:data:`MATERIAL_LOSS`) and the rate of LP-detected incoherence (any loss).
Per layer, the logit lens credences are scored with the hand construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.stats import mean_sem
from belieflens.analysis.truth import episode_truth
from belieflens.envs.dutch_book.coherence import (
    ArbitrageResult,
    DutchBook,
    find_book,
    scenario_book,
    scenario_events,
)
from belieflens.envs.dutch_book.credence import lens_yes_credence, yes_credence
from belieflens.envs.dutch_book.scenarios import SCENARIO_KINDS, ScenarioKind
from belieflens.errors import CacheFileError
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

PROBE = "credence"
"""The Dutch-book environment's Yes/No probe."""

MATERIAL_LOSS = 0.05
"""A sure loss above this (5% of one ticket) counts as a material violation."""


@dataclass(frozen=True)
class ScenarioScore:
    """One scenario's credences (listed order) under one delivery, and its books.

    Attributes:
        delivery: how the questions were asked.
        episode: the episode index.
        scenario: the scenario id.
        kind: which coherence law the questions test.
        credences: P(Yes) of each question, in the scenario's listed order.
        hand: the hand-constructed book for ``kind``.
        lp: the linear program's result (maximal sure loss, or a coherence proof).
    """

    delivery: str
    episode: int
    scenario: str
    kind: ScenarioKind
    credences: tuple[float, ...]
    hand: DutchBook
    lp: ArbitrageResult


def _kind(raw: str) -> ScenarioKind:
    for k in SCENARIO_KINDS:
        if raw == k:
            return k
    allowed = ", ".join(SCENARIO_KINDS)
    raise CacheFileError(f"truth_kind = {raw!r} is not a scenario kind ({allowed})")


def listed_order(cred: np.ndarray, order: str) -> np.ndarray | None:
    """Credences asked in ``order`` (comma-separated listed indices) put back in listed order.

    ``cred[t]`` is the credence read at turn ``t``; returns ``None`` if any is missing.
    """
    idx = [int(x) for x in order.split(",") if x != ""]
    vals = np.asarray(cred, dtype=np.float64)[: len(idx)]
    if len(vals) < len(idx) or not np.all(np.isfinite(vals)):
        return None
    out = np.empty(len(idx))
    out[idx] = vals
    return out


def score_scenarios(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> list[ScenarioScore]:
    """Score every scenario of a Dutch-book cache file under every delivery."""
    cred = yes_credence(ds, PROBE, method=method)
    kinds = episode_truth(ds, "kind")
    orders = episode_truth(ds, "order")
    ids = episode_truth(ds, "scenario")
    out: list[ScenarioScore] = []
    for d in cred["delivery"].values:
        for e in cred["episode"].values:
            order = str(orders.sel(episode=e).values)
            c = listed_order(cred.sel(delivery=d, episode=e).values, order)
            if c is None:
                continue
            kind = _kind(str(kinds.sel(episode=e).values))
            c = np.clip(c, 0.0, 1.0)
            out.append(
                ScenarioScore(
                    delivery=str(d),
                    episode=int(e),
                    scenario=str(ids.sel(episode=e).values),
                    kind=kind,
                    credences=tuple(float(x) for x in c),
                    hand=scenario_book(kind, c),
                    lp=find_book(c, scenario_events(kind, len(c))),
                )
            )
    return out


def _mean_sem(x: list[float]) -> tuple[float, float]:
    """Mean and SEM of ``x`` (:func:`~belieflens.analysis.stats.mean_sem`), NaN when empty."""
    if not x:
        return float("nan"), float("nan")
    ms = mean_sem(xr.DataArray(np.asarray(x, dtype=np.float64), dims="x"), "x")
    return float(ms["mean"]), float(ms["sem"])


def kind_summary(scores: list[ScenarioScore]) -> xr.Dataset:
    """Per (kind, delivery): mean hand sure loss ± SEM, LP loss, violation rates, n.

    Kinds include ``all``. Variables: ``loss_mean, loss_sem, lp_loss_mean,
    material_rate, incoherent_rate, decisiveness, n``; ``decisiveness`` is the mean
    ``|credence - 0.5|`` (credences all at 0.5 are trivially coherent for most laws).
    """
    deliveries = sorted({s.delivery for s in scores})
    kinds = [*SCENARIO_KINDS, "all"]
    names = ("loss_mean", "loss_sem", "lp_loss_mean", "material_rate", "incoherent_rate",
             "decisiveness", "n")
    data = {n: np.full((len(kinds), len(deliveries)), np.nan) for n in names}
    for i, k in enumerate(kinds):
        for j, d in enumerate(deliveries):
            sub = [s for s in scores if s.delivery == d and k in ("all", s.kind)]
            loss = [s.hand.sure_loss for s in sub]
            data["loss_mean"][i, j], data["loss_sem"][i, j] = _mean_sem(loss)
            data["lp_loss_mean"][i, j] = _mean_sem([s.lp.book.sure_loss for s in sub])[0]
            data["material_rate"][i, j] = _mean_sem([float(x > MATERIAL_LOSS) for x in loss])[0]
            data["incoherent_rate"][i, j] = _mean_sem([float(not s.lp.coherent) for s in sub])[0]
            data["decisiveness"][i, j] = _mean_sem(
                [float(np.mean(np.abs(np.asarray(s.credences) - 0.5))) for s in sub])[0]
            data["n"][i, j] = len(sub)
    return xr.Dataset(
        {n: (("kind", "delivery"), v) for n, v in data.items()},
        coords={"kind": kinds, "delivery": deliveries},
    )


def lens_sure_loss(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.DataArray:
    """Hand-construction sure loss of the logit-lens credences.

    Dims ``(delivery, episode, layer)``.
    """
    cred = lens_yes_credence(ds, PROBE, method=method)
    kinds = episode_truth(ds, "kind")
    orders = episode_truth(ds, "order")
    out = np.full((cred.sizes["delivery"], cred.sizes["episode"], cred.sizes["layer"]), np.nan)
    for i, d in enumerate(cred["delivery"].values):
        for j, e in enumerate(cred["episode"].values):
            kind = _kind(str(kinds.sel(episode=e).values))
            order = str(orders.sel(episode=e).values)
            for layer in range(cred.sizes["layer"]):
                c = listed_order(cred.sel(delivery=d, episode=e).isel(layer=layer).values, order)
                if c is not None:
                    out[i, j, layer] = scenario_book(kind, np.clip(c, 0.0, 1.0)).sure_loss
    return xr.DataArray(
        out,
        dims=("delivery", "episode", "layer"),
        coords={"delivery": cred["delivery"].values, "episode": cred["episode"].values,
                "layer": cred["layer"].values},
        name="lens_sure_loss",
    )


def _fmt(x: float, digits: int = 3) -> str:
    return "  nan" if not np.isfinite(x) else f"{x:.{digits}f}"


def _scenario_table(scores: list[ScenarioScore]) -> str:
    lines = [f"{'delivery':<12} {'ep':>3} {'scenario':<26} {'kind':<14} {'credences (listed)':<38}"
             f" {'hand':>6} {'LP':>6}  LP stakes"]
    for s in scores:
        cred = " ".join(f"{c:.2f}" for c in s.credences)
        stakes = " ".join(f"{x:+.2f}" for x in s.lp.book.stakes) if not s.lp.coherent else (
            "coherent")
        lines.append(f"{s.delivery:<12} {s.episode:>3} {s.scenario[:26]:<26} {s.kind:<14} "
                     f"{cred:<38} {_fmt(s.hand.sure_loss):>6} {_fmt(s.lp.book.sure_loss):>6}  "
                     f"{stakes}")
    return "\n".join(lines)


def _summary_table(summary: xr.Dataset) -> str:
    deliveries = [str(d) for d in summary["delivery"].values]
    head = f"{'kind':<15}" + "".join(
        f" | {d + ': loss ± SEM':<26} {'LP':>5} {'mat.':>5} {'LP inc.':>7} {'|c-.5|':>6} {'n':>3}"
        for d in deliveries
    )
    lines = [head]
    for k in summary["kind"].values:
        row = f"{k!s:<15}"
        for d in deliveries:
            s = summary.sel(kind=k, delivery=d)
            n = int(s["n"])
            row += (f" | {_fmt(float(s['loss_mean'])) + ' ± ' + _fmt(float(s['loss_sem'])):<26}"
                    f" {_fmt(float(s['lp_loss_mean'])):>5}"
                    f" {_fmt(float(s['material_rate']), 2):>5}"
                    f" {_fmt(float(s['incoherent_rate']), 2):>7}"
                    f" {_fmt(float(s['decisiveness'])):>6} {n:>3}")
        lines.append(row)
    return "\n".join(lines)


def _lens_line(lens: xr.DataArray) -> str:
    mean = lens.mean("episode", skipna=True)
    parts = []
    for d in mean["delivery"].values:
        m = mean.sel(delivery=d)
        if bool(m.isnull().all()):
            continue
        peak = int(m.fillna(-np.inf).argmax("layer"))
        parts.append(f"{d}: largest mean sure loss at layer {peak} ({float(m[peak]):.3f}), "
                     f"last layer {float(m[-1]):.3f}")
    return ("logit lens (hand books; early layers give credences near 0.5, which are trivially "
            "coherent): " + ("; ".join(parts) if parts else "no data"))


def _plots(summary: xr.Dataset, lens: xr.DataArray, out: Path) -> tuple[Path, ...]:
    plt = pyplot()
    bar = out / "dutch_book_loss.png"
    kinds = [str(k) for k in summary["kind"].values]
    deliveries = [str(d) for d in summary["delivery"].values]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / max(1, len(deliveries))
    x = np.arange(len(kinds))
    for j, d in enumerate(deliveries):
        s = summary.sel(delivery=d)
        ax.bar(x + j * width, s["loss_mean"].values, width,
               yerr=np.nan_to_num(s["loss_sem"].values), capsize=3, label=d)
    ax.set_xticks(x + width * (len(deliveries) - 1) / 2, kinds)
    ax.set_ylabel("sure loss per ticket (mean ± 1 SEM)")
    ax.set_title("Dutch books against the model's credences")
    ax.legend(fontsize=8)
    save(fig, bar, tight=True)
    curve = out / "dutch_book_lens.png"
    fig, ax = plt.subplots(figsize=(7, 3.8))
    mean = lens.mean("episode", skipna=True)
    for d in mean["delivery"].values:
        ax.plot(mean["layer"].values, mean.sel(delivery=d).values, marker=".", label=str(d))
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel("mean sure loss (hand book)")
    ax.set_title("Logit lens: coherence of each layer's credences")
    ax.legend(fontsize=8)
    save(fig, curve, tight=True)
    return bar, curve


def dutch_book_section(ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod) -> Section:
    """The ``dutch-book`` section: per-scenario books, per-kind summary, lens per layer."""
    scores = score_scenarios(ds, method=method)
    summary = kind_summary(scores)
    lens = lens_sure_loss(ds, method=method)
    scen = _scenario_table(scores)
    summ = _summary_table(summary)
    lens_text = _lens_line(lens)
    readout = (
        "credence = P(Yes) renormalised over Yes/No (answer variants summed), "
        f"{method} mean over both answer orders; sure loss in units of one ticket paying 1; "
        f"mat. = rate of hand sure loss > {MATERIAL_LOSS}; LP inc. = rate of scenarios the "
        "linear program proves incoherent (any loss); hand = the book for the scenario's kind "
        "(unit stakes), LP = the linear program's book of maximal sure loss with every stake "
        "in [-1, 1], so it can exceed the hand book's; |c-.5| = mean distance of the credences "
        "from 0.5"
    )
    text = f"{readout}\n\n{summ}\n\n{lens_text}\n\n{scen}"
    files: tuple[Path, ...] = ()
    md = f"{readout}.\n\n```\n{summ}\n```\n\n{lens_text}\n"
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        files = _plots(summary, lens, out_dir)
        md += "\n![sure loss per kind](dutch_book_loss.png)\n\n![lens](dutch_book_lens.png)\n"
    md += f"\n### Per scenario\n\n```\n{scen}\n```\n"
    return Section(title="Dutch-book coherence", text=text, markdown=md, files=files)
