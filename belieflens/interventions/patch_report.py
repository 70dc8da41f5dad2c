"""How a patch result file is reported: the belief transfer per layer and position set, the
pairs the role alignment gained, a layer × turn heatmap and the page's per-pair data
(registered as a :class:`~belieflens.report.interventions.InterventionKind`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.follow import patch_follow
from belieflens.analysis.interventions import (
    outcome_labels,
    patch_beliefs,
    patch_summary,
    patch_transfer,
)
from belieflens.dims import LAYER, POSITIONS
from belieflens.report.figures import pyplot, save
from belieflens.report.interventions import (
    InterventionKind,
    Metrics,
    best,
    definition,
    register,
)
from belieflens.report.viewer import patch_payload
from belieflens.types import DebiasMethod


def patch_metrics(ds: xr.Dataset, method: DebiasMethod) -> Metrics:
    """The debiased beliefs of every pair (``beliefs``), their transfer (``per_pair``), its
    mean over pairs per layer, position set and turn (``summary``), and the follow per
    pairing, layer and position set (``follow``:
    :func:`~belieflens.analysis.follow.patch_follow`)."""
    beliefs = patch_beliefs(ds, method=method)
    per_pair = patch_transfer(ds, method=method, beliefs=beliefs)
    return {"beliefs": beliefs, "per_pair": per_pair, "summary": patch_summary(per_pair),
            "follow": patch_follow(ds, method=method)}


def patch_text(metrics: Metrics, ds: xr.Dataset) -> str:
    """The mean belief transfer per probe: layers × position sets, then the alignment line."""
    summ = metrics["summary"]
    lines = ["belief transfer 1 - TVD(patched, source)/TVD(base, source), mean over turns "
             "and pairs (1 = the base answers like the source)"]
    sets = [str(s) for s in summ[POSITIONS].values]
    for d in summ["delivery"].values:
        for p in summ["probe"].values:
            lines.append(f"  {p} ({d})")
            lines.append("    layer " + "".join(f"{s:>10}" for s in sets))
            tr = summ["transfer_mean"].sel(delivery=d, probe=p).mean("turn", skipna=True)
            for la in summ[LAYER].values:
                row = tr.sel(layer=la).values
                lines.append(f"    {int(la):>5} " + "".join(f"{v:>10.3f}" for v in row))
    return "\n".join(lines) + _alignment_text(ds) + follow_text(metrics["follow"])


def follow_text(follow: xr.Dataset) -> str:
    """Follow per pairing: layers × position sets, each with its interval, and the gap over
    the untrained networks' where the file holds them."""
    lines = ["", "", "follow: the patched output's move along the oracle's move from the base's "
             "posterior to the source's (1 = as the oracle says, 0 = no move), all turns; "
             f"{int(follow.attrs['confidence'] * 100)}% intervals, {follow.attrs['interval']}"]
    for pairing in follow["pairing"].values:
        f = follow.sel(pairing=pairing)
        lines.append(f"  {pairing} pairing: {int(f['n'])} instance pairs, the oracle moves in "
                     f"{int(f['n_moving'])} (mean TVD {float(f['oracle_moved']):.3f}); the "
                     f"clean source's follow {float(f['source_follow']):+.3f}")
        lines += _follow_rows(f, "follow", "follow")
        if "gap_untrained" in f:
            lines += _follow_rows(f, "untrained_floor", "untrained networks' follow (mean)")
            lines += _follow_rows(f, "gap_untrained", "gap over the untrained networks")
    return "\n".join(lines)


def _follow_rows(f: xr.Dataset, name: str, title: str) -> list[str]:
    """``name`` (with its interval) per layer × position set, under ``title``."""
    sets = [str(x) for x in f[POSITIONS].values]
    lines = [f"    {title}", "    layer " + "".join(f"{s:>26}" for s in sets)]
    for la in f[LAYER].values:
        g = f.sel({LAYER: la})
        cells = [f"{float(g[name].sel({POSITIONS: s})):+.3f} "
                 f"[{float(g[name + '_low'].sel({POSITIONS: s})):+.3f}, "
                 f"{float(g[name + '_high'].sel({POSITIONS: s})):+.3f}]" for s in sets]
        lines.append(f"    {int(la):>5} " + "".join(f"{c:>26}" for c in cells))
    return lines


def _alignment_text(ds: xr.Dataset) -> str:
    """The pairs the role alignment gained in this study's environment, and the base
    positions left without a counterpart ('' for a file without them)."""
    if "pairs_gained" not in ds.attrs:
        return ""
    env = ", ".join(sorted({str(e) for e in np.asarray(ds["env"].values).tolist()})
                    ) if "env" in ds.variables else "this study"
    n = int(ds.sizes["pair"])
    lost = int(ds["n_unaligned"].sum()) if "n_unaligned" in ds else 0
    return (f"\n\npairs ({env}): {n}, of which {int(ds.attrs['pairs_gained'])} have contexts "
            "of different lengths, aligned by role (answer position, evidence spans, shared "
            f"template); base positions without a counterpart, never patched: {lost}")


def patch_headline(metrics: Metrics) -> str:
    """Where patching moves half of the belief: the first layer at the answer position and
    the last layer at the evidence tokens (mean transfer over probes, deliveries, turns)."""
    tr = metrics["summary"]["transfer_mean"].mean(("delivery", "probe", "turn"), skipna=True)
    layers = [int(x) for x in tr[LAYER].values]
    parts = []
    for s, which, word in (("answer", 0, "first"), ("evidence", -1, "last")):
        if s not in [str(x) for x in tr[POSITIONS].values]:
            continue
        vals = tr.sel({POSITIONS: s}).values
        hits = [la for la, v in zip(layers, vals, strict=True) if np.isfinite(v) and v >= 0.5]
        where = f"layer {hits[which]}" if hits else "no layer"
        parts.append(f"{s} position(s): {word} layer with transfer >= 0.5: {where}")
    return "; ".join(parts) or f"largest mean belief transfer: {best(tr)}"


def patch_heatmap(metrics: Metrics, out: Path) -> Path:
    """``patch_transfer.png``: the mean transfer, layer × turn, one panel per delivery, probe
    and position set."""
    summ = metrics["summary"]
    plt = pyplot()
    panels = [(str(d), str(p), str(s)) for d in summ["delivery"].values
              for p in summ["probe"].values for s in summ[POSITIONS].values]
    cols = summ.sizes[POSITIONS]
    rows = max(1, len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    im = None
    for ax, (d, p, s) in zip(axes.flat, panels, strict=False):
        grid = summ["transfer_mean"].sel(delivery=d, probe=p, positions=s).transpose(LAYER,
                                                                                      "turn")
        turns = grid["turn"].values
        im = ax.imshow(grid.values, aspect="auto", origin="lower", vmin=0, vmax=1,
                       cmap="magma", extent=(float(turns.min()) - 0.5,
                                             float(turns.max()) + 0.5, -0.5,
                                             grid.sizes[LAYER] - 0.5))
        ax.set_title(f"{p} ({d}): patch {s}", fontsize=9)
        ax.set_xticks(turns)
        layers = grid[LAYER].values
        step = max(1, len(layers) // 8)
        ax.set_yticks(range(0, len(layers), step), [str(x) for x in layers[::step]])
        ax.set_xlabel("turn")
        if s == panels[0][2]:
            ax.set_ylabel("layer (0 = embeddings)")
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), label="belief transfer")
    fig.suptitle("Interchange patching: how much of the source's belief moves into the base")
    return save(fig, out / "patch_transfer.png")


def _payload(metrics: Metrics, ds: xr.Dataset, method: DebiasMethod) -> dict[str, Any]:
    return patch_payload(metrics["summary"], metrics["beliefs"], metrics["per_pair"],
                         outcome_labels(ds))


PATCH = register(InterventionKind(
    name="intervention-patch", title="Interchange patching", metrics=patch_metrics,
    text=patch_text, headline=patch_headline, plot=patch_heatmap, payload=_payload,
    explanation=definition("patch")))
"""Interchange patching (:class:`~belieflens.interventions.patch.PatchOptions`)."""
