"""How an erasure result file is reported: how far the output belief falls back to the prior
under LEACE against a random subspace, the decoder's R² before and after, their plot and the
page's data (registered as a :class:`~belieflens.report.interventions.InterventionKind`)."""

from __future__ import annotations

from typing import Any

import xarray as xr

from belieflens.analysis.interventions import erase_summary
from belieflens.dims import LAYER
from belieflens.report import interventions as kinds
from belieflens.report.viewer import erase_payload
from belieflens.types import DebiasMethod


def erase_text(metrics: kinds.Metrics, ds: xr.Dataset) -> str:
    """The eraser used (the file's ``eraser``: LEACE, or with ``--at all`` the orthogonal
    variant per position role and why); per probe and layer: the decoder's R² clean and
    erased, the movement toward the prior under the eraser and the random control, the TVD of
    the erased output to the clean one; then the largest R² over the position roles
    checked."""
    summ = metrics["summary"]
    lines = ["movement toward the prior 1 - TVD(erased, prior)/TVD(clean, prior) (the prior: "
             "the model's own belief at turn 0), mean ± SEM over instances after turn 0"]
    if "eraser" in ds.attrs:
        lines.insert(0, f"eraser: {ds.attrs['eraser']}")
    for d in summ["delivery"].values:
        for p in summ["probe"].values:
            lines.append(f"  {p} ({d})")
            lines.append("    layer  R2 clean  R2 erased      LEACE          random   "
                         "TVD(erased, clean)")
            for la in summ[LAYER].values:
                s = summ.sel(delivery=d, probe=p, layer=la)
                lines.append(
                    f"    {int(la):>5} {float(ds['decoder_r2_clean'].sel(layer=la)):>9.3f} "
                    f"{float(ds['decoder_r2_erased'].sel(layer=la)):>10.3f} "
                    f"{float(s['toward_prior_mean']):>+7.3f}±{float(s['toward_prior_sem']):.3f} "
                    f"{float(s['control_toward_prior_mean']):>+7.3f}±"
                    f"{float(s['control_toward_prior_sem']):.3f} "
                    f"{float(s['tvd_erased_clean_mean']):>10.4f}")
    if "decoder_r2_erased_max" in ds:
        lines.append(f"  every position ({ds.attrs.get('decoder_r2_positions', '')}): largest "
                     "held-out decoder R² at one position role, clean -> after the erasers "
                     "applied")
        lines += [f"    {int(la):>5} {float(ds['decoder_r2_clean_max'].sel(layer=la)):>9.3f} "
                  f"{float(ds['decoder_r2_erased_max'].sel(layer=la)):>10.3f}"
                  for la in ds[LAYER].values]
    return "\n".join(lines)


def erase_headline(metrics: kinds.Metrics) -> str:
    """The layer of the largest movement toward the prior beyond the random control."""
    summ = metrics["summary"]
    tp = (summ["toward_prior_mean"] - summ["control_toward_prior_mean"]).mean(
        ("delivery", "probe"), skipna=True)
    return f"largest movement toward the prior beyond the random control: {kinds.best(tp)}"


PRIOR_PLOT = kinds.layer_plot(
    "erase_prior.png", (("toward_prior", "LEACE"), ("control_toward_prior", "random")),
    "movement toward the prior", "Erasure: how far the output belief falls back to the prior")
"""``erase_prior.png``: the movement toward the prior per layer, LEACE against the random
subspace."""


def _payload(metrics: kinds.Metrics, ds: xr.Dataset, method: DebiasMethod) -> dict[str, Any]:
    return erase_payload(metrics["summary"])


ERASE = kinds.register(kinds.InterventionKind(
    name="intervention-erase", title="Concept erasure (LEACE)",
    metrics=kinds.summarised(erase_summary), text=erase_text, headline=erase_headline,
    plot=PRIOR_PLOT, payload=_payload, explanation=kinds.definition("erase")))
"""Concept erasure (:class:`~belieflens.interventions.erase.EraseOptions`)."""
