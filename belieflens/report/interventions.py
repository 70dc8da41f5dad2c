"""``belieflens analyze RESULT.h5`` for intervention files: tables, heatmaps, a report section.

The numbers come from :mod:`belieflens.analysis.interventions` (their definitions are in its
docstring); here they are printed, plotted and written as ``report.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis import interventions as summaries
from belieflens.analysis.interventions import (
    erase_summary,
    outcome_labels,
    patch_beliefs,
    patch_summary,
    patch_transfer,
    steer_curves,
    steer_summary,
)
from belieflens.dims import LAYER, POSITIONS
from belieflens.report.analysis import Analysis
from belieflens.report.atomic import final, staged
from belieflens.report.belief_check import belief_check_text
from belieflens.report.figures import pyplot, save
from belieflens.report.viewer import (
    erase_payload,
    intervention_page,
    patch_payload,
    steer_payload,
)
from belieflens.store.results import open_result
from belieflens.types import DebiasMethod


def _patch_text(summ: xr.Dataset) -> str:
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
    return "\n".join(lines)


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


def _patch_headline(summ: xr.Dataset) -> str:
    """Where patching moves half of the belief: the first layer at the answer position and
    the last layer at the evidence tokens (mean transfer over probes, deliveries, turns)."""
    tr = summ["transfer_mean"].mean(("delivery", "probe", "turn"), skipna=True)
    layers = [int(x) for x in tr[LAYER].values]
    parts = []
    for s, which, word in (("answer", 0, "first"), ("evidence", -1, "last")):
        if s not in [str(x) for x in tr[POSITIONS].values]:
            continue
        vals = tr.sel({POSITIONS: s}).values
        hits = [la for la, v in zip(layers, vals, strict=True) if np.isfinite(v) and v >= 0.5]
        where = f"layer {hits[which]}" if hits else "no layer"
        parts.append(f"{s} position(s): {word} layer with transfer >= 0.5: {where}")
    return "; ".join(parts) or f"largest mean belief transfer: {_best(tr)}"


def _patch_heatmap(summ: xr.Dataset, out: Path) -> Path:
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
    return save(fig, out)


def _steer_text(summ: xr.Dataset, ds: xr.Dataset) -> str:
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
    return "\n".join(lines)


def _layer_lines(summ: xr.Dataset, out: Path, series: tuple[tuple[str, str], ...],
                 ylabel: str, title: str) -> Path:
    """One panel per (delivery, probe): each ``series`` (variable stem, label) mean ± SEM per
    layer, against a zero line."""
    plt = pyplot()
    panels = [(str(d), str(p)) for d in summ["delivery"].values for p in summ["probe"].values]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, (d, p) in zip(axes[0], panels, strict=True):
        s = summ.sel(delivery=d, probe=p)
        layers = s[LAYER].values
        for name, label in series:
            m = s[f"{name}_mean"].values
            e = np.nan_to_num(s[f"{name}_sem"].values)
            ax.plot(layers, m, marker="o", label=label)
            ax.fill_between(layers, m - e, m + e, alpha=0.2)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_title(f"{p} ({d})")
        ax.set_xlabel("layer")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    return save(fig, out, tight=True)


def _steer_plot(summ: xr.Dataset, out: Path) -> Path:
    return _layer_lines(
        summ, out, (("slope", "decoder direction"), ("control_slope", "random direction")),
        "d belief mean / d alpha",
        "Steering: slope of the output belief along the decoder direction vs control")


def _erase_text(summ: xr.Dataset, ds: xr.Dataset) -> str:
    lines = ["movement toward the prior 1 - TVD(erased, prior)/TVD(clean, prior) (the prior: "
             "the model's own belief at turn 0), mean ± SEM over instances after turn 0"]
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


def _erase_plot(summ: xr.Dataset, out: Path) -> Path:
    return _layer_lines(
        summ, out, (("toward_prior", "LEACE"), ("control_toward_prior", "random")),
        "movement toward the prior",
        "Erasure: how far the output belief falls back to the prior")


_TITLES = {
    "intervention-patch": "Interchange patching",
    "intervention-steer": "Steering along decoder directions",
    "intervention-erase": "Concept erasure (LEACE)",
}


def report(path: str | Path, out_dir: str | Path | None = None, *,
           method: DebiasMethod = "geometric", html: bool = True) -> Analysis:
    """Analyse an intervention result file: tables (``text``), and with ``out_dir`` a heatmap
    or layer plot, ``report.md`` holding the section and, with ``html``, the interactive
    page ``intervention.html`` (:func:`belieflens.report.viewer.intervention_page`), written
    into a folder beside ``out_dir`` and moved into place once whole
    (:func:`belieflens.report.atomic.staged`): a failed run leaves the previous report."""
    ds = open_result(path)
    with staged(Path(out_dir) if out_dir is not None else None) as stage:
        done = _report(ds, stage.folder if stage is not None else None, method=method,
                       html=html)
    return dataclasses.replace(done, files=final(stage, done.files))


def _report(ds: xr.Dataset, out: Path | None, *, method: DebiasMethod,
            html: bool) -> Analysis:
    """:func:`report` of the opened result ``ds``, its files written into ``out``."""
    kind = str(ds.attrs["kind"])
    files: list[Path] = []
    page = out is not None and html
    data: dict[str, object] = {}
    if kind == "intervention-patch":
        beliefs = patch_beliefs(ds, method=method)
        per_pair = patch_transfer(ds, method=method, beliefs=beliefs)
        summ = patch_summary(per_pair)
        body = _patch_text(summ) + _alignment_text(ds)
        headline = _patch_headline(summ)
        if out is not None:
            files.append(_patch_heatmap(summ, out / "patch_transfer.png"))
        data = patch_payload(summ, beliefs, per_pair, outcome_labels(ds)) if page else {}
    elif kind == "intervention-steer":
        summ = steer_summary(ds, method=method)
        body = _steer_text(summ, ds)
        sel = summ["selectivity_mean"].mean(("delivery", "probe"), skipna=True)
        headline = f"most selective steering layer: {_best(sel)}"
        if out is not None:
            files.append(_steer_plot(summ, out / "steer_slopes.png"))
        data = steer_payload(summ, steer_curves(ds, method=method)) if page else {}
    else:
        summ = erase_summary(ds, method=method)
        body = _erase_text(summ, ds)
        tp = (summ["toward_prior_mean"] - summ["control_toward_prior_mean"]).mean(
            ("delivery", "probe"), skipna=True)
        headline = f"largest movement toward the prior beyond the random control: {_best(tp)}"
        if out is not None:
            files.append(_erase_plot(summ, out / "erase_prior.png"))
        data = erase_payload(summ) if page else {}
    body += belief_check_text(ds)
    title = _TITLES[kind]
    prov = (f"model {ds.attrs.get('model_id')} | study {ds.attrs.get('study_path')} "
            f"(fingerprint {str(ds.attrs.get('study_fingerprint'))[:12]}) | debias {method}")
    text = f"== {title} ==\n{prov}\n\n{body}\n\n{headline}\n"
    if out is not None:
        md = out / "report.md"
        pics = "".join(f"\n![{f.stem}]({f.name})\n" for f in files)
        md.write_text(f"# belieflens: {title.lower()}\n\n{prov}\n\n**Headline:** {headline}\n"
                      f"{pics}\n```\n{body}\n```\n\n{_explain(kind)}\n")
        files.append(md)
    if out is not None and html:
        files.append(intervention_page(kind, title, prov, headline, f"{body}\n\n{_explain(kind)}",
                                       data, out / "intervention.html").path)
    return Analysis(text=text, headline=headline, files=tuple(files))


def _best(da: xr.DataArray) -> str:
    """``'<value> at <coords>'`` for the largest finite value of ``da``."""
    vals = np.asarray(da.values, dtype=np.float64)
    if not np.isfinite(vals).any():
        return "n/a (no finite values)"
    idx = np.unravel_index(int(np.nanargmax(vals)), vals.shape)
    where = ", ".join(f"{d} {da[d].values[i]}" for d, i in zip(da.dims, idx, strict=True))
    return f"{vals[idx]:.3f} at {where}"


def _explain(kind: str) -> str:
    doc = summaries.__doc__ or ""
    marker = {"intervention-patch": "- **patch**", "intervention-steer": "- **steer**",
              "intervention-erase": "- **erase**"}[kind]
    start = doc.find(marker)
    end = doc.find("\n- **", start + 1)
    return " ".join(doc[start + 2 : end if end > 0 else None].split())


def sections(names: Sequence[str]) -> list[str]:
    """The report titles of result kinds ``names`` (for listings)."""
    return [_TITLES[n] for n in names if n in _TITLES]
