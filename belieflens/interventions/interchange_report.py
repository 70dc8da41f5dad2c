"""How an interchange result file is reported: follow per layer of the learned subspace beside
its floors (random subspaces, untrained networks), on held-out pairs of each pairing, the best
layer chosen on validation pairs and read on test pairs, a figure and the page's data
(registered as a :class:`~belieflens.report.interventions.InterventionKind`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.follow import TRAINED, best_layer, chosen_pairing, interchange_follow
from belieflens.report import interventions as kinds
from belieflens.report.figures import pyplot, save
from belieflens.report.viewer import coords, encode
from belieflens.types import DebiasMethod

SUMMARY_VARS: tuple[str, ...] = ("follow", "follow_low", "follow_high", "control_follow",
                                 "control_follow_low", "control_follow_high")
"""Per-model variables of the page."""

GAP_VARS: tuple[str, ...] = ("untrained_floor", "gap", "gap_low", "gap_high")
"""Trained-network variables of the page (where untrained networks ran)."""


def interchange_metrics(ds: xr.Dataset, method: DebiasMethod) -> kinds.Metrics:
    """The follow summary (:func:`~belieflens.analysis.follow.interchange_follow`)."""
    return {"summary": interchange_follow(ds, method=method)}


def _ci(s: xr.Dataset, name: str) -> str:
    v, lo, hi = (float(s[f"{name}{x}"]) for x in ("", "_low", "_high"))
    return f"{v:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _table(summ: xr.Dataset, split: str, pairing: str) -> list[str]:
    s = summ.sel(split=split, pairing=pairing)
    trained = s.sel(model=TRAINED)
    untrained = "gap_untrained" in s
    head = (f"  {split} pairs, {pairing} pairing: {int(s['n'])} instance pairs, the oracle "
            f"moves in {int(s['n_moving'])} (mean TVD {float(s['oracle_moved']):.3f})")
    cols = ("    layer  learned                    random subspace            "
            + ("untrained  " if untrained else "") + "gap over the floor         moved")
    lines = [head, cols]
    for la in summ["layer"].values:
        t = trained.sel(layer=la)
        row = f"    {int(la):>5}  {_ci(t, 'follow'):<26} {_ci(t, 'control_follow'):<26} "
        if untrained:
            row += f"{float(s['untrained_floor'].sel(layer=la)):+.3f}     "
        row += f"{_ci(s.sel(layer=la), 'gap'):<26} {float(t['moved']):.3f}"
        lines.append(row)
    return lines


def interchange_text(metrics: kinds.Metrics, ds: xr.Dataset) -> str:
    """Follow per layer for each held-out split and pairing, then the best layer's test
    numbers."""
    summ = metrics["summary"]
    rank = int(ds.sizes.get("rank", 0))
    lines = [f"follow of a rank-{rank} subspace swapped at the answer position (learned by "
             "interchange on training episodes): the output's move along the oracle's move "
             "from the base's posterior to the source's (1 = as the oracle says, 0 = no move); "
             f"{int(summ.attrs['confidence'] * 100)}% intervals, {summ.attrs['interval']}"]
    for split in summ["split"].values:
        for pairing in summ["pairing"].values:
            lines += _table(summ, str(split), str(pairing))
    nets = [str(m) for m in summ["model"].values if str(m) != TRAINED]
    lines.append("  untrained networks: " + (", ".join(nets) if nets else "none run"))
    return "\n".join(lines)


def interchange_headline(metrics: kinds.Metrics) -> str:
    """The best layer (on validation pairs) and its test follow beside the floors."""
    summ = metrics["summary"]
    layer = best_layer(summ)
    if layer is None or "test" not in summ["split"].values:
        return "interchange: no validation pairs to choose a layer on"
    pairing = chosen_pairing(summ)
    s = summ.sel(split="test", pairing=pairing, layer=layer)
    t = s.sel(model=TRAINED)
    floors = f"random subspace {float(t['control_follow']):+.3f}"
    if "untrained_floor" in s:
        floors += f", untrained {float(s['untrained_floor']):+.3f}"
    return (f"interchange follow at layer {layer} (best on validation pairs), test pairs "
            f"({pairing} pairing): "
            f"{_ci(t, 'follow')}; above the larger floor by {_ci(s, 'gap')} ({floors})")


def interchange_plot(metrics: kinds.Metrics, out: Path) -> Path:
    """``interchange_follow.png``: follow per layer on the test pairs of each pairing, the
    learned subspace against the random subspaces and the untrained networks."""
    summ = metrics["summary"]
    split = "test" if "test" in summ["split"].values else str(summ["split"].values[0])
    plt = pyplot()
    pairings = [str(p) for p in summ["pairing"].values]
    fig, axes = plt.subplots(1, len(pairings), figsize=(5 * len(pairings), 3.6), squeeze=False)
    layers = summ["layer"].values
    for ax, pairing in zip(axes[0], pairings, strict=True):
        s = summ.sel(split=split, pairing=pairing)
        for m in s["model"].values:
            style = "-" if str(m) == TRAINED else ":"
            for var, label in (("follow", "learned"), ("control_follow", "random subspace")):
                if var == "control_follow" and str(m) != TRAINED:
                    continue
                v = s[var].sel(model=m)
                ax.plot(layers, v, style, marker="o", label=f"{label} ({m})")
                ax.fill_between(layers, s[f"{var}_low"].sel(model=m),
                                s[f"{var}_high"].sel(model=m), alpha=0.15)
        ax.axhline(0, color="k", lw=0.5)
        ax.axhline(1, color="k", lw=0.5, ls="--")
        ax.set_title(f"{split} pairs, {pairing} pairing", fontsize=9)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_ylabel("follow")
        ax.legend(fontsize=6)
    fig.suptitle("Interchange: the learned subspace's follow against its floors")
    return save(fig, out / "interchange_follow.png", tight=True)


def _payload(metrics: kinds.Metrics, ds: xr.Dataset, method: DebiasMethod) -> dict[str, Any]:
    summ = metrics["summary"]
    order = ("split", "pairing", "model", "layer")
    data: dict[str, Any] = {"coords": coords(summ, order), "best_layer": best_layer(summ),
                            "summary": {v: encode(summ[v], order) for v in SUMMARY_VARS}}
    if "gap" in summ:
        data["gaps"] = {v: encode(summ[v], ("split", "pairing", "layer"))
                        for v in GAP_VARS if v in summ}
    data["moved"] = encode(summ["moved"], order)
    data["n"] = encode(summ["n"].astype(np.float64), ("split", "pairing"))
    return data


INTERCHANGE = kinds.register(kinds.InterventionKind(
    name="intervention-interchange", title="Interchange on a learned subspace",
    metrics=interchange_metrics, text=interchange_text, headline=interchange_headline,
    plot=interchange_plot, payload=_payload, explanation=kinds.definition("interchange")))
"""Interchange on a learned subspace
(:class:`~belieflens.interventions.interchange.InterchangeOptions`)."""
