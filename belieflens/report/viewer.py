"""The interactive viewer: one self-contained HTML page per study, intervention result or
comparison (``analyze --out DIR`` writes ``DIR/study.html``; ``--no-html`` skips it).

**Chart library: Plotly.** The page inlines plotly.js as the ``plotly`` package ships it
(:func:`plotly.offline.get_plotlyjs`: one script, no network at view time) and draws every
chart from the page's own script with ``Plotly.react``. The views are linked through one
selection (delivery, probe, episode, turn, layer, lens, metric) that the keyboard, the
selects, the token view and a click on a heatmap cell (``plotly_click``) all change; Plotly's
imperative API redraws the linked views from that state directly. Vega-Lite (Altair) would
keep such state in its own declarative selections, which a keyboard handler and an HTML
token view outside the charts cannot drive as simply, and its offline inline mode needs the
``vl-convert-python`` binary wheel on top of ``altair``; Plotly needs its one pure-Python
package.

**Token text.** A cache file stores the context ``input_ids`` and ``answer_pos`` but no
tokenizer. Extraction now also records ``token_text_id`` / ``token_text``: every id the study
uses, each decoded alone by the tokenizer at extraction (a few thousand short strings, a
variable the schema may add). The page shows those strings, and a file extracted before that
shows the ids; analysis never loads a tokenizer or model weights.

**Scale.** The page embeds the aggregates (means over episodes, the tables, position bias)
and per-episode slices (beliefs, divergences per layer for every metric, and the tokens of
the read-out shown per turn) as base64 float32/int32 arrays. When the slices of every episode
together exceed :data:`EMBED_BUDGET`, each episode's slice is written beside the page under
``<page>_files/`` as a script that the page loads when that episode is selected (scripts load
from disk where ``fetch`` does not), only the first episode is embedded, and the page and
``analyze`` say so in one line. Nothing is dropped.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.power_record import Marks
from belieflens.dims import EPISODE
from belieflens.store.results import KIND_PREFIX

EMBED_BUDGET = 8_000_000
"""Bytes of encoded per-episode slices a page embeds; above it they are written beside it."""

SLICE_ORDER: Mapping[str, tuple[str, ...]] = {
    "belief": ("delivery", "probe", "turn", "outcome"),
    "oracle": ("delivery", "probe", "turn", "outcome"),
    "lens_belief": ("source", "delivery", "probe", "turn", "layer", "outcome"),
    "output_divergence": ("metric", "delivery", "probe", "turn"),
    "lens_divergence": ("metric", "source", "delivery", "probe", "turn", "layer"),
}
"""The variables of one episode's slice and the axis order the page indexes them in."""


@dataclass(frozen=True)
class Page:
    """A written viewer page: its path, the slice files beside it, and its one-line note."""

    path: Path
    files: tuple[Path, ...]
    note: str


def encode(values: xr.DataArray | np.ndarray, order: Sequence[str] = ()) -> dict[str, Any]:
    """An array as ``{"shape", "dtype", "b64"}``: little-endian float32 (NaN kept) or int32,
    base64; a DataArray is transposed to ``order`` first."""
    if isinstance(values, xr.DataArray):
        values = values.transpose(*order).values if order else values.values
    arr = np.asarray(values)
    kind = "i4" if arr.dtype.kind in "iub" else "f4"
    data = np.ascontiguousarray(arr, dtype="<i4" if kind == "i4" else "<f4")
    return {"shape": list(arr.shape), "dtype": kind,
            "b64": base64.b64encode(data.tobytes()).decode("ascii")}


def coords(ds: xr.Dataset, names: Sequence[str]) -> dict[str, list[Any]]:
    """The values of coordinates ``names`` of ``ds`` as JSON lists."""
    return {n: np.asarray(ds[n].values).tolist() for n in names if n in ds.coords}


def _json(obj: object) -> str:
    """JSON safe inside a ``<script>`` element (no ``</``, no HTML comment openers)."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _asset(name: str) -> str:
    return (resources.files("belieflens") / "data" / "viewer" / name).read_text("utf-8")


def render_html(payload: Mapping[str, Any], title: str) -> str:
    """The page: the template with plotly.js, the viewer's CSS and script, and ``payload``
    (JSON in a ``<script type="application/json">``) inlined."""
    from plotly.offline import get_plotlyjs

    fill = {
        "TITLE": html.escape(title),
        "CSS": _asset("viewer.css"),
        "PLOTLY": get_plotlyjs(),
        "DATA": _json(payload),
        "APP": _asset("viewer.js"),
    }
    # one pass over the template's markers: nothing inserted is searched for markers again
    parts = re.split(r"/\*BL-([A-Z]+)\*/", _asset("page.html"))
    return "".join(fill[p] if i % 2 else p for i, p in enumerate(parts))


def write_page(path: Path, payload: Mapping[str, Any], title: str) -> Path:
    """Write :func:`render_html` of ``payload`` to ``path``; returns ``path``."""
    path.write_text(render_html(payload, title), encoding="utf-8")
    return path


def episode_slice(episodes: xr.Dataset, episode: int) -> dict[str, Any]:
    """One episode's slice of :func:`belieflens.analysis.episodes.episode_views` (merged with
    :func:`~belieflens.analysis.episodes.episode_tokens`): every array of
    :data:`SLICE_ORDER`, and the tokens of each (delivery, probe, turn) read-out."""
    one = episodes.sel({EPISODE: episode})
    out: dict[str, Any] = {name: encode(one[name], order) for name, order in SLICE_ORDER.items()}
    grid = one["input_ids"].transpose("delivery", "probe", "turn", "token").values
    flat = grid.reshape(-1, grid.shape[-1])
    lengths = (flat >= 0).sum(axis=1).astype(np.int32)
    ids = flat[flat >= 0]  # each row's ids are a prefix of the row (padding at the end)
    shape = grid.shape[:-1]
    out["tokens"] = {
        "ids": encode(ids.astype(np.int32)),
        "start": encode((np.cumsum(lengths) - lengths).reshape(shape).astype(np.int32)),
        "length": encode(lengths.reshape(shape)),
        "answer_pos": encode(one["answer_pos"].transpose("delivery", "probe", "turn")),
        "rotation": encode(one["rotation"].transpose("delivery", "probe", "turn")),
    }
    return out


def slices(episodes: xr.Dataset, page: Path,
           budget: int | None = None) -> tuple[dict[str, Any], tuple[Path, ...], str]:
    """The page's ``slices`` entry, the files written beside ``page`` and the one-line note.

    Every episode is embedded when their slices together fit ``budget`` bytes (default
    :data:`EMBED_BUDGET`); otherwise each is written to ``<page stem>_files/episode-<n>.js``
    (loaded when selected) and the first is embedded too.
    """
    budget = EMBED_BUDGET if budget is None else budget
    names = [int(e) for e in np.asarray(episodes[EPISODE].values)]
    kept: dict[str, Any] = {}
    total = 0
    for e in names:
        one = episode_slice(episodes, e)
        total += len(_json(one))
        if total > budget:
            break
        kept[str(e)] = one
    if total <= budget:
        return {"embedded": kept, "files": {}}, (), f"all {len(names)} episodes embedded"
    folder = page.with_name(page.stem + "_files")
    folder.mkdir(exist_ok=True)
    files: dict[str, str] = {}
    written: list[Path] = []
    for e in names:
        f = folder / f"episode-{e}.js"
        f.write_text(f"blSlice({e},{_json(episode_slice(episodes, e))});\n", encoding="utf-8")
        files[str(e)] = f"{folder.name}/{f.name}"
        written.append(f)
    size = sum(f.stat().st_size for f in written)
    note = (f"{len(names)} episodes: their slices ({size / 1e6:.1f} MB) exceed the page's "
            f"{budget / 1e6:.0f} MB budget, so each is written beside the page in "
            f"{folder.name}/ and loaded when selected; keep the folder next to the page")
    embedded = {str(names[0]): episode_slice(episodes, names[0])}
    return {"embedded": embedded, "files": files}, tuple(written), note


# ----------------------------------------------------------------------------- a study

STUDY_COORDS = ("delivery", "probe", "episode", "turn", "layer", "source", "metric")
"""The coordinates of a study's ``episodes`` group that the page selects along."""


def provenance(attrs: Mapping[str, Any]) -> str:
    """One line of a file's provenance (model, environment, episodes, seed, debiasing)."""
    return (f"model {attrs.get('model_id')} · env {attrs.get('env_name')} "
            f"{attrs.get('env_params')} · episodes {attrs.get('episodes')} · seed "
            f"{attrs.get('seed')} · debias {attrs.get('debias')} · belieflens "
            f"{attrs.get('belieflens_version')} ({attrs.get('git_commit')})")


def _labels(episodes: xr.Dataset) -> dict[str, list[str]]:
    lab = episodes["outcome_label"]
    return {str(p): [str(x) for x in lab.sel(probe=p).values if str(x)]
            for p in lab["probe"].values}


def _tokens(episodes: xr.Dataset) -> dict[str, Any] | None:
    if "token_text_id" not in episodes:
        return None
    return {"ids": [int(i) for i in episodes["token_text_id"].values],
            "text": [str(t) for t in episodes["token_text"].values]}


def _bias(bias: xr.Dataset) -> dict[str, Any]:
    return {
        "rotation": [int(r) for r in bias["rotation"].values],
        "option": [int(o) for o in bias["option"].values],
        "rotation_tvd_mean": encode(bias["rotation_tvd_mean"], ("delivery", "probe", "rotation")),
        "rotation_tvd_sem": encode(bias["rotation_tvd_sem"], ("delivery", "probe", "rotation")),
        "position_excess_mean": encode(bias["position_excess_mean"],
                                       ("delivery", "probe", "option")),
        "position_excess_sem": encode(bias["position_excess_sem"],
                                      ("delivery", "probe", "option")),
    }


def floor_payload(floors: xr.Dataset | None, marks: Marks | None) -> dict[str, Any] | None:
    """A study's floors for the page (``None`` without): per floored source its value per
    layer, each control's, the untrained band, the best statistic baseline, the layers beyond
    both, the selectivity with its interval, and its power note (``marks``)."""
    if floors is None:
        return None
    by: dict[str, Any] = {}
    for src in [str(x) for x in floors["source"].values]:
        f = floors.sel(source=src)
        best = str(f["baseline_best"].values)
        by[src] = {
            **{k: encode(f[k]) for k in ("trained", "floor_min", "floor_max", "floor_mean",
                                         "selectivity", "selectivity_low",
                                         "selectivity_high")},
            "controls": encode(f["control_value"], ("control", "layer")),
            "exceeds": encode(np.asarray(f["exceeds"].values, dtype=np.int32)),
            "metric": str(f["metric"].values),
            "baseline": best,
            "baseline_value": (float(f["baseline_value"].sel(baseline=best)) if best else None),
            "note": marks.note(src) if marks is not None else "",
        }
    return {"sources": list(by), "layer": [int(x) for x in floors["layer"].values],
            "controls": [str(c) for c in floors["control"].values],
            "level": float(floors.attrs.get("level", 0.95)), "by_source": by}


def study_payload(results: xr.DataTree, texts: Mapping[str, str], headline: str,
                  slice_entry: Mapping[str, Any], note: str, *,
                  floors: xr.Dataset | None = None,
                  marks: Marks | None = None) -> dict[str, Any]:
    """The page's data for a study: :func:`belieflens.analysis.results.study_results` with its
    ``episodes`` group, the printed tables ``texts`` (title -> text), the headline, the
    episode slices (:func:`slices`) and the note on where they are; with ``floors``, each
    floored read-out per layer beside its untrained band and statistic baselines
    (:func:`floor_payload`); ``marks``: each read-out's power note."""
    from belieflens.analysis.episodes import UNITS

    ep = results["episodes"].to_dataset()
    attrs = {str(k): v for k, v in results.attrs.items()}
    metrics = [str(m) for m in ep["metric"].values]
    return {
        "kind": "study",
        "title": f"belieflens study: {attrs.get('env_name')} on {attrs.get('model_id')}",
        "provenance": provenance(attrs),
        "headline": headline,
        "note": note,
        "coords": coords(ep, STUDY_COORDS),
        "units": {m: UNITS[m] for m in metrics},
        "labels": _labels(ep),
        "multi_token": str(attrs.get("multi_token", "")),
        "means": {
            "lens_divergence": encode(ep["lens_divergence_mean"], (
                "metric", "source", "delivery", "probe", "turn", "layer")),
            "output_divergence": encode(ep["output_divergence_mean"], (
                "metric", "delivery", "probe", "turn")),
        },
        "tokens": _tokens(ep),
        "tables": dict(texts),
        "bias": _bias(results["position_bias"].to_dataset()),
        "slices": dict(slice_entry),
        "floors": floor_payload(floors, marks),
        "marks": ({str(s): marks.note(str(s)) for s in ep["source"].values}
                  if marks is not None else {}),
    }


def study_page(results: xr.DataTree, texts: Mapping[str, str], headline: str,
               path: Path, *, budget: int | None = None, floors: xr.Dataset | None = None,
               marks: Marks | None = None) -> Page:
    """Write the viewer page of a study's results (with their ``episodes`` group) to
    ``path``, the episode slices embedded or beside it (:func:`slices` with ``budget``);
    ``floors`` and ``marks`` as :func:`study_payload` takes them."""
    entry, files, note = slices(results["episodes"].to_dataset(), path, budget)
    payload = study_payload(results, texts, headline, entry, note, floors=floors, marks=marks)
    write_page(path, payload, str(payload["title"]))
    return Page(path, files, note)


# ----------------------------------------------------------------------------- interventions

def _arrays(ds: xr.Dataset, names: Sequence[str], order: Sequence[str]) -> dict[str, Any]:
    return {n: encode(ds[n], order) for n in names if n in ds}


def patch_payload(summ: xr.Dataset, beliefs: xr.Dataset, per_pair: xr.Dataset,
                  labels: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """A patch file's page data: :func:`~belieflens.analysis.interventions.patch_summary`
    (the layer × position heatmap), and per instance pair its transfer and the base, source
    and patched beliefs (:func:`~belieflens.analysis.interventions.patch_beliefs`); ``labels``
    are each probe's outcome labels."""
    grid = ("delivery", "probe", "turn", "layer", "positions")
    pair = "instance_pair"
    return {
        "coords": coords(summ, grid),
        "labels": {str(k): [str(x) for x in v] for k, v in labels.items()},
        "summary": _arrays(summ, ("transfer_mean", "transfer_sem", "tvd_source_oracle_mean",
                                  "tvd_source_oracle_sem", "n"), grid),
        "pairs": {
            **{k: np.asarray(beliefs[k].values).tolist()
               for k in ("delivery", "probe", "turn", "episode", "source_episode")},
            "n_outcome": encode(beliefs["n_outcome"]),
            **_arrays(per_pair, ("transfer", "tvd_source_oracle"), (pair, "layer", "positions")),
            **_arrays(beliefs, ("base", "source", "source_oracle"), (pair, "outcome")),
            "patched": encode(beliefs["patched"], (pair, "layer", "positions", "outcome")),
        },
    }


def steer_payload(summ: xr.Dataset, curves: xr.Dataset) -> dict[str, Any]:
    """A steering file's page data: slopes per layer
    (:func:`~belieflens.analysis.interventions.steer_summary`) and the curves of the point
    estimate against α (:func:`~belieflens.analysis.interventions.steer_curves`)."""
    per_layer = ("delivery", "probe", "layer")
    return {
        "coords": {**coords(summ, per_layer), **coords(curves, ("alpha",))},
        "summary": _arrays(summ, ("slope_mean", "slope_sem", "control_slope_mean",
                                  "control_slope_sem", "selectivity_mean", "selectivity_sem"),
                           per_layer),
        "curves": _arrays(curves, ("estimate_mean", "estimate_sem", "control_estimate_mean",
                                   "control_estimate_sem"), (*per_layer, "alpha")),
    }


def erase_payload(summ: xr.Dataset) -> dict[str, Any]:
    """An erasure file's page data: movement toward the prior per layer
    (:func:`~belieflens.analysis.interventions.erase_summary`)."""
    per_layer = ("delivery", "probe", "layer")
    return {"coords": coords(summ, per_layer),
            "summary": _arrays(summ, ("toward_prior_mean", "toward_prior_sem",
                                      "control_toward_prior_mean", "control_toward_prior_sem",
                                      "tvd_erased_clean_mean"), per_layer)}


def intervention_page(kind: str, title: str, prov: str, headline: str, body: str,
                      data: Mapping[str, Any], path: Path) -> Page:
    """Write the page of an intervention result (``kind`` its ``kind`` attribute; ``data``
    one of :func:`patch_payload`, :func:`steer_payload`, :func:`erase_payload`)."""
    payload = {"kind": kind.removeprefix(KIND_PREFIX), "title": f"belieflens: {title}",
               "provenance": prov, "headline": headline, "note": "", "body": body, **data}
    write_page(path, payload, str(payload["title"]))
    return Page(path, (), "")


# ----------------------------------------------------------------------------- compare

def compare_page(cmp: xr.Dataset, table: str, head: str, path: Path) -> Page:
    """Write the page of :func:`belieflens.analysis.compare.compare`: every model's TVD to
    the oracle against relative depth at the chosen turn, and its output per turn."""
    payload = compare_payload(cmp, table, head)
    write_page(path, payload, str(payload["title"]))
    return Page(path, (), "")


def compare_payload(cmp: xr.Dataset, table: str, head: str) -> dict[str, Any]:
    """What :func:`compare_page` embeds (its ``title`` is the page's)."""
    grid = ("model", "delivery", "probe", "turn", "depth", "source")
    return {
        "kind": "compare",
        "title": f"belieflens: {cmp.sizes['model']} models on {cmp.attrs.get('env_name')}",
        "provenance": (f"env {cmp.attrs.get('env_name')} {cmp.attrs.get('env_params')} · "
                       f"episodes {cmp.attrs.get('episodes')} · seed {cmp.attrs.get('seed')}"
                       f" · debias {cmp.attrs.get('debias')}"),
        "headline": head, "note": "", "body": table,
        "depth_note": str(cmp.attrs.get("depth", "")),
        "coords": coords(cmp, grid),
        "model_id": [str(x) for x in cmp["model_id"].values],
        "n_layers": [int(x) for x in cmp["n_layers"].values],
        # each model's own layer per depth (one shared coordinate when the depths agree)
        "layer": encode(cmp["layer"].broadcast_like(cmp["model"]), ("model", "depth")),
        "tvd_mean": encode(cmp["tvd_mean"], grid),
        "tvd_sem": encode(cmp["tvd_sem"], grid),
        "output_tvd_mean": encode(cmp["output_tvd_mean"], ("model", "delivery", "probe", "turn")),
        "output_tvd_sem": encode(cmp["output_tvd_sem"], ("model", "delivery", "probe", "turn")),
        "floors": compare_floor_payload(cmp),
    }


def compare_floor_payload(cmp: xr.Dataset) -> dict[str, Any] | None:
    """Each compared model's floored read-outs per relative depth beside its untrained band
    (:mod:`belieflens.analysis.compare_floor`), with each read-out's power note; ``None``
    where no model has untrained controls among the files."""
    from belieflens.report.compare_floor import has_floors, model_marks

    if not has_floors(cmp):
        return None
    grid = ("model", "readout", "depth")
    models = [str(m) for m in cmp["model"].values]
    readouts = [str(r) for r in cmp["readout"].values]
    exceeds = cmp["floor_exceeds"].transpose(*grid).values
    return {"readouts": readouts,
            "has": [bool(cmp["floor_trained"].sel(model=m).notnull().any()) for m in models],
            **{k: encode(cmp[f"floor_{k}" if k != "trained" else "floor_trained"], grid)
               for k in ("trained", "min", "max")},
            "exceeds": encode((np.nan_to_num(np.asarray(exceeds, dtype=np.float64)) > 0)
                              .astype(np.int32)),  # a control's NaN: not beyond
            "notes": {m: {r: model_marks(cmp, m).note(r) for r in readouts} for m in models}}
