"""``belieflens analyze RESULT.h5`` for intervention files: tables, heatmaps, a report section.

Every belief here is debiased over the Latin-square rotations of its probe instance
(:func:`belieflens.readouts.debias`), like the output beliefs of a study.

- **patch**: per pair of instances (base episode, source episode at one delivery, probe and
  turn), the belief transfer ``1 − TVD(p_patched, p_source) / TVD(p_base, p_source)`` (0: the
  patch changed nothing, 1: the base now answers like the source) and the TVD of the patched
  belief to the source's oracle, per layer × position set × turn (mean over pairs);
- **steer**: the slope of the debiased belief's point estimate against α per layer (mean ±
  SEM over instances), along the probe direction and along the random control, and the
  selectivity (probe slope − control slope);
- **erase**: how far the erased belief moves toward the prior (the model's own belief at turn
  0): ``1 − TVD(p_erased, p_prior) / TVD(p_clean, p_prior)`` over instances after turn 0, for
  LEACE and for the random subspace, and the held-out probe R² before and after erasure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.beliefs import instance_logprob
from belieflens.analysis.report import Analysis
from belieflens.dims import LAYER, OUTCOME, PAIR, POSITIONS
from belieflens.episodes.latin import debias
from belieflens.interventions.results import open_result
from belieflens.interventions.study import belief_mean
from belieflens.types import DebiasMethod

F64 = NDArray[np.float64]


def _tvd(p: F64, q: F64) -> F64:
    return np.asarray(0.5 * np.abs(p - q).sum(axis=-1), dtype=np.float64)


def _mean_sem(x: F64, axis: int = 0) -> tuple[F64, F64, NDArray[np.int64]]:
    """NaN-aware mean, SEM and count along ``axis``."""
    ok = np.isfinite(x)
    n = ok.sum(axis=axis)
    with np.errstate(all="ignore"):
        mean = np.where(n > 0, np.nansum(x, axis=axis) / np.maximum(n, 1), np.nan)
        dev = np.where(ok, x - np.expand_dims(mean, axis), 0.0)
        var = (dev**2).sum(axis=axis) / np.maximum(n - 1, 1)
        sem = np.where(n > 1, np.sqrt(var / np.maximum(n, 1)), np.nan)
    return np.asarray(mean), np.asarray(sem), np.asarray(n, dtype=np.int64)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# -- patch -------------------------------------------------------------------------------


def patch_transfer(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Belief transfer and TVD to the source's oracle per pair of probe instances.

    Returns variables ``transfer`` and ``tvd_source_oracle`` with dims ``(instance_pair, layer,
    positions)`` and, on ``instance_pair``, the coordinates ``delivery, probe, turn, episode,
    source_episode``.
    """
    keys = list(zip(*(np.asarray(ds[n].values).tolist()
                      for n in ("delivery", "probe", "turn", "episode", "source_episode")),
                    strict=True))
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    rot = np.asarray(ds["rotation"].values)
    outcome = np.asarray(ds["outcome"].values, dtype=np.int64)
    n_out = np.asarray(ds["n_outcome"].values, dtype=np.int64)
    patched = np.asarray(ds["patched_logprob"].transpose(PAIR, LAYER, POSITIONS, ...).values)
    base = np.asarray(ds["base_logprob"].values)
    source = np.asarray(ds["source_logprob"].values)
    s_oracle = np.asarray(ds["source_oracle"].values)
    n_l, n_s = patched.shape[1], patched.shape[2]
    transfer = np.full((len(groups), n_l, n_s), np.nan)
    to_oracle = np.full_like(transfer, np.nan)
    coords: dict[str, list[Any]] = {k: [] for k in ("delivery", "probe", "turn", "episode",
                                                     "source_episode")}
    for g, (key, rows_list) in enumerate(sorted(groups.items())):
        for name, v in zip(coords, key, strict=True):
            coords[name].append(v)
        rows = np.array(sorted(rows_list, key=lambda r: rot[r]))
        n_k = int(n_out[rows[0]])
        shown = outcome[rows][:, :n_k]
        if np.any(shown < 0) or len(set(shown[:, 0].tolist())) < n_k:
            continue  # not every outcome shown: the instance's rotations are incomplete
        pb = debias(base[rows][:, :n_k], shown, method=method)
        ps = debias(source[rows][:, :n_k], shown, method=method)
        pp = debias(np.moveaxis(patched[rows][..., :n_k], 0, -2), shown, method=method)
        gap = float(_tvd(pb, ps))
        if gap > 1e-9:
            transfer[g] = 1.0 - _tvd(pp, ps) / gap
        to_oracle[g] = _tvd(pp, s_oracle[rows[0], :n_k])
    dim = "instance_pair"
    return xr.Dataset(
        {"transfer": ((dim, LAYER, POSITIONS), transfer),
         "tvd_source_oracle": ((dim, LAYER, POSITIONS), to_oracle)},
        coords={LAYER: ds[LAYER].values, POSITIONS: ds[POSITIONS].values,
                **{k: (dim, np.asarray(v)) for k, v in coords.items()}},
    )


def patch_summary(per_pair: xr.Dataset) -> xr.Dataset:
    """Means (and SEMs, counts) over instance pairs per ``(delivery, probe, turn, layer,
    positions)``."""
    dim = "instance_pair"
    out: dict[str, Any] = {}
    keys = sorted({(str(d), str(p), int(t)) for d, p, t in zip(
        per_pair["delivery"].values, per_pair["probe"].values, per_pair["turn"].values,
        strict=True)})
    delivs = sorted({k[0] for k in keys})
    probes = sorted({k[1] for k in keys})
    turns = sorted({k[2] for k in keys})
    shape = (len(delivs), len(probes), len(turns), per_pair.sizes[LAYER],
             per_pair.sizes[POSITIONS])
    for var in ("transfer", "tvd_source_oracle"):
        mean, sem, n = np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape, int)
        for d, p, t in keys:
            sel = ((per_pair["delivery"].values == d) & (per_pair["probe"].values == p)
                   & (per_pair["turn"].values == t))
            m, s, c = _mean_sem(per_pair[var].values[sel])
            i = (delivs.index(d), probes.index(p), turns.index(t))
            mean[i], sem[i], n[i] = m, s, c
        dims = ("delivery", "probe", "turn", LAYER, POSITIONS)
        out[f"{var}_mean"] = (dims, mean)
        out[f"{var}_sem"] = (dims, sem)
        out["n"] = (dims, n)
    del dim
    return xr.Dataset(out, coords={"delivery": delivs, "probe": probes, "turn": turns,
                                   LAYER: per_pair[LAYER].values,
                                   POSITIONS: per_pair[POSITIONS].values})


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
    plt = _pyplot()
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
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# -- steer -------------------------------------------------------------------------------


def _labels(ds: xr.Dataset) -> dict[str, list[str]]:
    """Each probe's outcome labels (from its first read-out)."""
    out: dict[str, list[str]] = {}
    labels = np.asarray(ds["outcome_label"].values).astype(str)
    for i, p in enumerate(np.asarray(ds["probe"].values).astype(str)):
        out.setdefault(str(p), [x for x in labels[i] if x])
    return out


def _means(beliefs: xr.DataArray, labels: dict[str, list[str]]) -> xr.DataArray:
    """Point estimate of each belief (per probe's labels), dropping ``outcome``."""
    parts = []
    for p in beliefs["probe"].values:
        b = beliefs.sel(probe=p)
        vals = belief_mean(np.moveaxis(b.transpose(..., OUTCOME).values, -1, -1),
                           labels[str(p)])
        parts.append(b.isel({OUTCOME: 0}, drop=True).copy(data=vals))
    return xr.concat(parts, dim="probe").transpose(*[d for d in beliefs.dims if d != OUTCOME])


def steer_summary(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Slope of the debiased belief's point estimate vs α per (delivery, probe, layer):
    ``slope`` (probe direction), ``control_slope``, ``selectivity`` (mean over instances),
    with SEMs and counts."""
    labels = _labels(ds)
    alphas = np.asarray(ds["alpha"].values, dtype=np.float64)
    out: dict[str, Any] = {}
    for var, name in (("steered_logprob", "slope"), ("control_logprob", "control_slope")):
        b = instance_logprob(ds, ds[var], method=method, extra=(LAYER, "alpha"))
        m = _means(b, labels)  # delivery probe episode turn layer alpha
        a = alphas - alphas.mean()
        mc = m - m.mean("alpha")
        slope = (mc * xr.DataArray(a, dims="alpha")).sum("alpha", skipna=False) / float(
            (a**2).sum())
        out[name] = slope.stack(instance=("episode", "turn"))
    sel = out["slope"] - out["control_slope"]
    res: dict[str, Any] = {}
    for name, da in (*out.items(), ("selectivity", sel)):
        vals = da.transpose("delivery", "probe", LAYER, "instance").values
        mean, sem, n = _mean_sem(vals, axis=-1)
        dims = ("delivery", "probe", LAYER)
        res[f"{name}_mean"] = (dims, mean)
        res[f"{name}_sem"] = (dims, sem)
        res["n"] = (dims, n)
    first = out["slope"]
    return xr.Dataset(res, coords={"delivery": first["delivery"].values,
                                   "probe": first["probe"].values, LAYER: first[LAYER].values})


def _steer_text(summ: xr.Dataset, ds: xr.Dataset) -> str:
    at = ("every position after the evidence" if ds.attrs.get("at") == "after-evidence"
          else "the answer position")
    lines = ["slope of the debiased belief's point estimate per unit alpha (alpha in SDs of "
             f"the residuals along the probe direction, added at {at}), mean ± SEM over "
             "instances"]
    for d in summ["delivery"].values:
        for p in summ["probe"].values:
            lines.append(f"  {p} ({d})")
            lines.append("    layer   probe R2        slope   control slope  selectivity")
            for la in summ[LAYER].values:
                s = summ.sel(delivery=d, probe=p, layer=la)
                r2 = float(ds["probe_r2"].sel(layer=la))
                lines.append(
                    f"    {int(la):>5} {r2:>10.3f} {float(s['slope_mean']):>+8.4f}±"
                    f"{float(s['slope_sem']):.4f} {float(s['control_slope_mean']):>+8.4f}±"
                    f"{float(s['control_slope_sem']):.4f} {float(s['selectivity_mean']):>+9.4f}")
    return "\n".join(lines)


def _layer_lines(summ: xr.Dataset, out: Path, series: tuple[tuple[str, str], ...],
                 ylabel: str, title: str) -> Path:
    """One panel per (delivery, probe): each ``series`` (variable stem, label) mean ± SEM per
    layer, against a zero line."""
    plt = _pyplot()
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
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _steer_plot(summ: xr.Dataset, out: Path) -> Path:
    return _layer_lines(
        summ, out, (("slope", "probe direction"), ("control_slope", "random direction")),
        "d belief mean / d alpha",
        "Steering: slope of the output belief along the probe direction vs control")


# -- erase -------------------------------------------------------------------------------


def erase_summary(ds: xr.Dataset, *, method: DebiasMethod = "geometric") -> xr.Dataset:
    """Movement toward the prior per (delivery, probe, layer), for LEACE (``toward_prior``)
    and the random subspace (``control_toward_prior``), and ``tvd_erased_clean``; means ±
    SEM over instances after turn 0."""
    clean = instance_logprob(ds, ds["clean_logprob"], method=method)
    prior = instance_logprob(ds, ds["prior_logprob"], method=method)
    gap = 0.5 * abs(clean - prior).sum(OUTCOME, skipna=False)
    gap = gap.where(gap > 1e-9)
    later = clean["turn"] > 0
    res: dict[str, Any] = {}
    for var, name in (("erased_logprob", "toward_prior"),
                      ("control_logprob", "control_toward_prior")):
        b = instance_logprob(ds, ds[var], method=method, extra=(LAYER,))
        frac = 1.0 - 0.5 * abs(b - prior).sum(OUTCOME, skipna=False) / gap
        frac = frac.where(later)
        vals = frac.stack(instance=("episode", "turn")).transpose(
            "delivery", "probe", LAYER, "instance").values
        mean, sem, n = _mean_sem(vals, axis=-1)
        dims = ("delivery", "probe", LAYER)
        res[f"{name}_mean"], res[f"{name}_sem"], res["n"] = (dims, mean), (dims, sem), (dims, n)
        if var == "erased_logprob":
            moved = 0.5 * abs(b - clean).sum(OUTCOME, skipna=False)
            mv = moved.stack(instance=("episode", "turn")).transpose(
                "delivery", "probe", LAYER, "instance").values
            res["tvd_erased_clean_mean"] = (dims, _mean_sem(mv, axis=-1)[0])
    return xr.Dataset(res, coords={"delivery": clean["delivery"].values,
                                   "probe": clean["probe"].values, LAYER: ds[LAYER].values})


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
                    f"    {int(la):>5} {float(ds['probe_r2_clean'].sel(layer=la)):>9.3f} "
                    f"{float(ds['probe_r2_erased'].sel(layer=la)):>10.3f} "
                    f"{float(s['toward_prior_mean']):>+7.3f}±{float(s['toward_prior_sem']):.3f} "
                    f"{float(s['control_toward_prior_mean']):>+7.3f}±"
                    f"{float(s['control_toward_prior_sem']):.3f} "
                    f"{float(s['tvd_erased_clean_mean']):>10.4f}")
    return "\n".join(lines)


def _erase_plot(summ: xr.Dataset, out: Path) -> Path:
    return _layer_lines(
        summ, out, (("toward_prior", "LEACE"), ("control_toward_prior", "random")),
        "movement toward the prior",
        "Erasure: how far the output belief falls back to the prior")


# -- entry point -------------------------------------------------------------------------


_TITLES = {
    "intervention-patch": "Interchange patching",
    "intervention-steer": "Steering along probe directions",
    "intervention-erase": "Concept erasure (LEACE)",
}


def report(path: str | Path, out_dir: str | Path | None = None, *,
           method: DebiasMethod = "geometric") -> Analysis:
    """Analyse an intervention result file: tables (``text``), and with ``out_dir`` a heatmap
    or layer plot and ``report.md`` holding the section."""
    ds = open_result(path)
    kind = str(ds.attrs["kind"])
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    if kind == "intervention-patch":
        summ = patch_summary(patch_transfer(ds, method=method))
        body = _patch_text(summ)
        headline = _patch_headline(summ)
        if out is not None:
            files.append(_patch_heatmap(summ, out / "patch_transfer.png"))
    elif kind == "intervention-steer":
        summ = steer_summary(ds, method=method)
        body = _steer_text(summ, ds)
        sel = summ["selectivity_mean"].mean(("delivery", "probe"), skipna=True)
        headline = f"most selective steering layer: {_best(sel)}"
        if out is not None:
            files.append(_steer_plot(summ, out / "steer_slopes.png"))
    else:
        summ = erase_summary(ds, method=method)
        body = _erase_text(summ, ds)
        tp = (summ["toward_prior_mean"] - summ["control_toward_prior_mean"]).mean(
            ("delivery", "probe"), skipna=True)
        headline = f"largest movement toward the prior beyond the random control: {_best(tp)}"
        if out is not None:
            files.append(_erase_plot(summ, out / "erase_prior.png"))
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
    doc = __doc__ or ""
    marker = {"intervention-patch": "- **patch**", "intervention-steer": "- **steer**",
              "intervention-erase": "- **erase**"}[kind]
    start = doc.find(marker)
    end = doc.find("\n- **", start + 1)
    return " ".join(doc[start + 2 : end if end > 0 else None].split())


def sections(names: Sequence[str]) -> list[str]:
    """The report titles of result kinds ``names`` (for listings)."""
    return [_TITLES[n] for n in names if n in _TITLES]
