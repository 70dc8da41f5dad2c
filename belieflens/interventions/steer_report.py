"""How a steering result file is reported: the slope of the belief per unit α along the
decoder direction against a random one, per layer, their plot and the page's curves
(registered as a :class:`~belieflens.report.interventions.InterventionKind`)."""

from __future__ import annotations

from typing import Any

import xarray as xr

from belieflens.analysis.follow import steer_follow
from belieflens.analysis.interventions import steer_curves, steer_summary
from belieflens.dims import LAYER
from belieflens.report import interventions as kinds
from belieflens.report.viewer import steer_payload
from belieflens.types import DebiasMethod


def steer_text(metrics: kinds.Metrics, ds: xr.Dataset) -> str:
    """Per probe and layer: the decoder's R², the slope, the control slope, the
    selectivity."""
    summ = metrics["summary"]
    at = ("every position after the evidence" if ds.attrs.get("at") == "after-evidence"
          else "the answer position")
    lines = ["slope of the debiased belief's point estimate per unit alpha (alpha in SDs of "
             f"the residuals along the decoder direction, added at {at}), mean ± SEM over "
             "instances"]
    for d in summ["delivery"].values:
        for p in summ["probe"].values:
            lines.append(f"  {p} ({d})")
            lines.append("    layer decoder R2        slope   control slope  selectivity")
            for la in summ[LAYER].values:
                s = summ.sel(delivery=d, probe=p, layer=la)
                r2 = float(ds["decoder_r2"].sel(layer=la))
                lines.append(
                    f"    {int(la):>5} {r2:>10.3f} {float(s['slope_mean']):>+8.4f}±"
                    f"{float(s['slope_sem']):.4f} {float(s['control_slope_mean']):>+8.4f}±"
                    f"{float(s['control_slope_sem']):.4f} {float(s['selectivity_mean']):>+9.4f}")
    return "\n".join(lines) + _follow_text(summ, ds)


def _follow_text(summ: xr.Dataset, ds: xr.Dataset) -> str:
    """The slopes on the follow scale (:func:`~belieflens.analysis.follow.steer_follow`),
    where the file stores its decoders' gains."""
    f = steer_follow(summ, ds)
    if f is None:
        return ""
    lines = ["", "follow: the slope divided by how far the decoder reads the concept move per "
             "unit alpha (1 = the output moves as far as the decoded oracle belief), mean ± SEM"]
    for d in f["delivery"].values:
        for p in f["probe"].values:
            lines.append(f"  {p} ({d})")
            lines.append("    layer      follow        random direction")
            for la in f[LAYER].values:
                s = f.sel(delivery=d, probe=p, layer=la)
                lines.append(f"    {int(la):>5} {float(s['follow_mean']):>+8.3f}±"
                             f"{float(s['follow_sem']):.3f} "
                             f"{float(s['control_follow_mean']):>+9.3f}"
                             f"±{float(s['control_follow_sem']):.3f}")
    return "\n".join(lines)


def steer_headline(metrics: kinds.Metrics) -> str:
    """The layer of the largest mean selectivity."""
    sel = metrics["summary"]["selectivity_mean"].mean(("delivery", "probe"), skipna=True)
    return f"most selective steering layer: {kinds.best(sel)}"


SLOPE_PLOT = kinds.layer_plot(
    "steer_slopes.png",
    (("slope", "decoder direction"), ("control_slope", "random direction")),
    "d belief mean / d alpha",
    "Steering: slope of the output belief along the decoder direction vs control")
"""``steer_slopes.png``: the slopes per layer, decoder direction against the random one."""


def _payload(metrics: kinds.Metrics, ds: xr.Dataset, method: DebiasMethod) -> dict[str, Any]:
    return steer_payload(metrics["summary"], steer_curves(ds, method=method))


STEER = kinds.register(kinds.InterventionKind(
    name="intervention-steer", title="Steering along decoder directions",
    metrics=kinds.summarised(steer_summary), text=steer_text, headline=steer_headline,
    plot=SLOPE_PLOT, payload=_payload, explanation=kinds.definition("steer")))
"""Steering (:class:`~belieflens.interventions.steer.SteerOptions`)."""
