"""``belieflens analyze RESULT.h5`` for intervention files: tables, a figure, a report section.

Each kind of intervention registers how its result file is reported (:class:`InterventionKind`:
its title, its numbers, their table, headline, figure and viewer data, and the paragraph that
defines them) with :func:`register`, from its own module of :mod:`belieflens.interventions`;
:func:`report` dispatches on the file's ``kind`` attribute through that registry and adds what
every kind shares (provenance, the belief check, ``report.md`` and the interactive page). The
numbers come from :mod:`belieflens.analysis.interventions` (their definitions are in its
docstring, :func:`definition`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis import interventions as summaries
from belieflens.analysis.power_record import Marks, marks_for
from belieflens.dims import LAYER
from belieflens.errors import CacheFileError
from belieflens.report.analysis import Analysis
from belieflens.report.atomic import final, staged
from belieflens.report.belief_check import belief_check_text
from belieflens.report.figures import pyplot, save
from belieflens.report.viewer import intervention_page
from belieflens.store.results import KIND_PREFIX, open_result
from belieflens.types import DebiasMethod

Metrics = Mapping[str, xr.Dataset]
"""A kind's numbers, by name (e.g. ``summary``): what its table, figure and page show."""


@dataclass(frozen=True)
class InterventionKind:
    """How ``belieflens analyze`` reports one kind of intervention result file.

    Attributes:
        name: the file's ``kind`` attribute (it starts with
            :data:`~belieflens.store.results.KIND_PREFIX`), written once, here.
        title: the report's title.
        metrics: ``(ds, method) -> Metrics``: the numbers of the opened file.
        text: ``(metrics, ds) -> str``: their table.
        headline: ``(metrics) -> str``: the report's one-line headline.
        plot: ``(metrics, out_dir) -> Path``: the figure written into ``out_dir``.
        payload: ``(metrics, ds, method) -> dict``: the data of the interactive page
            (:func:`belieflens.report.viewer.intervention_page`).
        explanation: the paragraph under the table that defines the numbers.

    Examples:
        >>> sorted(k.title for k in kinds())  # doctest: +NORMALIZE_WHITESPACE
        ['Concept erasure (LEACE)', 'Interchange on a learned subspace', 'Interchange patching',
         'Steering along decoder directions']
    """

    name: str
    title: str
    metrics: Callable[[xr.Dataset, DebiasMethod], Metrics]
    text: Callable[[Metrics, xr.Dataset], str]
    headline: Callable[[Metrics], str]
    plot: Callable[[Metrics, Path], Path]
    payload: Callable[[Metrics, xr.Dataset, DebiasMethod], dict[str, Any]]
    explanation: str


REGISTRY: dict[str, InterventionKind] = {}
"""``kind`` attribute -> how it is reported, in the order the kinds registered."""


def register(kind: InterventionKind) -> InterventionKind:
    """Register ``kind`` under its ``name`` and return it; a second kind under a name already
    taken raises ``ValueError``."""
    known = REGISTRY.get(kind.name)
    if known is not None and known is not kind:
        raise ValueError(f"intervention kind {kind.name!r} is taken by {known.title!r}")
    REGISTRY[kind.name] = kind
    return kind


def kinds() -> list[InterventionKind]:
    """Every registered kind, in registration order."""
    return list(REGISTRY.values())


def kind_of(ds: xr.Dataset, path: str | Path) -> InterventionKind:
    """The registered kind of the opened result file ``ds`` (read from ``path``); a kind no
    module registered is one line (:class:`CacheFileError`)."""
    name = str(ds.attrs.get("kind", ""))
    if name not in REGISTRY:
        raise CacheFileError(f"{path}: no report for intervention kind {name!r} (known: "
                             + ", ".join(REGISTRY) + ")")
    return REGISTRY[name]


def definition(word: str) -> str:
    """The paragraph of :mod:`belieflens.analysis.interventions`' docstring that defines the
    numbers of ``word`` (its ``- **word**`` item), folded onto one line."""
    doc = summaries.__doc__ or ""
    start = doc.find(f"- **{word}**")
    end = doc.find("\n- **", start + 1)
    return " ".join(doc[start + 2 : end if end > 0 else None].split())


def summarised(summary: Callable[..., xr.Dataset]
               ) -> Callable[[xr.Dataset, DebiasMethod], Metrics]:
    """The ``metrics`` of a kind whose numbers are one summary, ``summary(ds, method=...)``
    (under the name ``summary``)."""

    def metrics(ds: xr.Dataset, method: DebiasMethod) -> Metrics:
        return {"summary": summary(ds, method=method)}

    return metrics


def best(da: xr.DataArray) -> str:
    """``'<value> at <coords>'`` for the largest finite value of ``da``."""
    vals = np.asarray(da.values, dtype=np.float64)
    if not np.isfinite(vals).any():
        return "n/a (no finite values)"
    idx = np.unravel_index(int(np.nanargmax(vals)), vals.shape)
    where = ", ".join(f"{d} {da[d].values[i]}" for d, i in zip(da.dims, idx, strict=True))
    return f"{vals[idx]:.3f} at {where}"


def layer_plot(file: str, series: tuple[tuple[str, str], ...], ylabel: str,
               title: str) -> Callable[[Metrics, Path], Path]:
    """The ``plot`` of a kind whose figure is its ``summary``'s ``series`` (variable stem,
    label) per layer, mean ± SEM, one panel per (delivery, probe), written as ``file``."""

    def plot(metrics: Metrics, out: Path) -> Path:
        return _layer_lines(metrics["summary"], out / file, series, ylabel, title)

    return plot


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


def report(path: str | Path, out_dir: str | Path | None = None, *,
           method: DebiasMethod = "geometric", html: bool = True) -> Analysis:
    """Analyse an intervention result file: tables (``text``), and with ``out_dir`` its
    kind's figure, ``report.md`` holding the section and, with ``html``, the interactive
    page ``intervention.html`` (:func:`belieflens.report.viewer.intervention_page`), written
    into a folder beside ``out_dir`` and moved into place once whole
    (:func:`belieflens.report.atomic.staged`): a failed run leaves the previous report."""
    ds = open_result(path)
    kind = kind_of(ds, path)
    with staged(Path(out_dir) if out_dir is not None else None) as stage:
        done = _report(ds, kind, stage.folder if stage is not None else None, method=method,
                       html=html)
    return dataclasses.replace(done, files=final(stage, done.files))


def result_marks(ds: xr.Dataset) -> Marks:
    """The power marks (:mod:`belieflens.analysis.power_record`) of the kind of study an
    intervention result was run on: its environment, and a toy or a language model (a file
    that does not record its model's source: a shipped toy by its name)."""
    from belieflens.model.load import TOY_MODELS

    spec = str(ds.attrs.get("model_spec", ""))
    source = str(ds.attrs.get("model_source", "toy" if spec in TOY_MODELS else ""))
    return marks_for({"env_name": str(ds.attrs.get("study_env_name", "")),
                      "model_source": source})


def _report(ds: xr.Dataset, kind: InterventionKind, out: Path | None, *,
            method: DebiasMethod, html: bool) -> Analysis:
    """:func:`report` of the opened result ``ds`` of ``kind``, its files written into
    ``out``."""
    metrics = kind.metrics(ds, method)
    body = kind.text(metrics, ds)
    headline = kind.headline(metrics) + f"; {kind.name.removeprefix(KIND_PREFIX)}: " \
        f"{result_marks(ds).note(kind.name.removeprefix(KIND_PREFIX))}"
    files = [kind.plot(metrics, out)] if out is not None else []
    data = kind.payload(metrics, ds, method) if out is not None and html else {}
    body += belief_check_text(ds)
    prov = (f"model {ds.attrs.get('model_id')} | study {ds.attrs.get('study_path')} "
            f"(fingerprint {str(ds.attrs.get('study_fingerprint'))[:12]}) | debias {method}")
    text = f"== {kind.title} ==\n{prov}\n\n{body}\n\n{headline}\n"
    if out is not None:
        md = out / "report.md"
        pics = "".join(f"\n![{f.stem}]({f.name})\n" for f in files)
        md.write_text(f"# belieflens: {kind.title.lower()}\n\n{prov}\n\n**Headline:** "
                      f"{headline}\n{pics}\n```\n{body}\n```\n\n{kind.explanation}\n")
        files.append(md)
    if out is not None and html:
        files.append(intervention_page(kind.name, kind.title, prov, headline,
                                       f"{body}\n\n{kind.explanation}", data,
                                       out / "intervention.html").path)
    return Analysis(text=text, headline=headline, files=tuple(files))
