"""``belieflens analyze``: a study's results as tables on stdout, PNGs, ``report.md`` and the
interactive page ``study.html`` (:mod:`belieflens.report.viewer`).

The numbers are :func:`belieflens.analysis.results.study_results` (one ``xarray.DataTree``) and
the sections of the file's environment (:class:`~belieflens.report.section.Section`, owned by
the environment: ``belieflens.envs.sections_for``, passed in as ``sections``); here they are
printed, plotted and written.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

import numpy as np
import xarray as xr

from belieflens import results as written
from belieflens.analysis.baselines import Statistics
from belieflens.analysis.floor import check_floors, floor
from belieflens.analysis.geometry import Target
from belieflens.analysis.power_record import Marks, Record, marks_for
from belieflens.analysis.results import study_results
from belieflens.analysis.summary import DECODER_FOLDS, decoder_tvd
from belieflens.errors import BeliefLensError, ParameterError
from belieflens.heap import release_freed_memory
from belieflens.lens.tuned import TunedLens, load_tuned_lens, parse_lens_spec
from belieflens.report.atomic import final, staged
from belieflens.report.figures import (
    calibration_plot,
    layer_profile_plot,
    lens_heatmap,
    position_bias_plot,
    source_heatmaps,
    trajectory_plot,
)
from belieflens.report.floor import RESULT_COLUMNS, floor_section
from belieflens.report.section import Section, SectionFn
from belieflens.report.tables import (
    best_layers,
    format_baselines,
    format_lens_table,
    format_position_bias,
    format_summary,
    format_turn_table,
)
from belieflens.report.transfer import NO_CHECKS, AnalyzeMore, DecoderChecks
from belieflens.report.viewer import study_page
from belieflens.run import cluster
from belieflens.run.cluster import DaskClient
from belieflens.store.cache import cache_files, open_cache
from belieflens.store.integrity import verify_file
from belieflens.types import DebiasMethod

SectionsFor = Callable[[str], Sequence[SectionFn]]
"""An environment name to its report sections (``belieflens.envs.sections_for``)."""

TargetsFor = Callable[[xr.Dataset], Mapping[str, Target]]
"""A cache file to the belief-geometry targets its environment defines
(``belieflens.envs.readout_targets``): the floors' geometry sources."""


StatisticsFor = Callable[[xr.Dataset], Statistics]
"""A cache file to its statistic baselines' features per read-out
(``belieflens.envs.statistic_features``): the baselines beside every decoder result."""


def no_statistics(ds: xr.Dataset) -> Statistics:
    """No statistic baselines."""
    return {}


def no_sections(env: str) -> Sequence[SectionFn]:
    """No environment sections (the generic analysis only)."""
    return ()


def no_targets(ds: xr.Dataset) -> Mapping[str, Target]:
    """No geometry targets (the floors of the lens and the decoders only)."""
    return {}


@dataclass(frozen=True)
class Analysis:
    """What :func:`analyze` produced: stdout text, the headline line, files written."""

    text: str
    headline: str
    files: tuple[Path, ...]


def _lens(lens: str | Path | TunedLens | None) -> TunedLens | None:
    if lens is None or isinstance(lens, TunedLens):
        return lens
    folder = parse_lens_spec(lens) if isinstance(lens, str) else lens
    return load_tuned_lens(folder)


def analyze(
    path: str | Path,
    out_dir: str | Path | None = None,
    *,
    method: DebiasMethod = "geometric",
    lens: str | Path | TunedLens | None = None,
    decoders: bool = True,
    seed: int = 0,
    client: DaskClient | str | None = None,
    sections: SectionsFor = no_sections,
    html: bool = True,
    floors: Sequence[str | Path] = (),
    targets: TargetsFor = no_targets,
    statistics: StatisticsFor = no_statistics,
    record: Record | None = None,
    **more: Unpack[AnalyzeMore],
) -> Analysis:
    """Analyse a cache file, or a study directory of shards (one dask-backed dataset, read
    chunk by chunk: the analysis's memory is bounded by chunks, not by the study).

    With ``client`` (a :class:`distributed.Client` or a ``--cluster`` value: ``local[:N]``,
    ``tcp://HOST:PORT``, ``PATH/scheduler.json``), the dask work runs on that cluster: the
    shards' checksums are verified by the workers, one task per shard, the lens scores
    are computed there chunk by chunk (only ``[query, layer, option]`` comes back), and the
    decoders are fitted there, one task per layer group (only held-out TVDs come back).

    Debiased beliefs and their TVD/MAE to the oracle per turn; the summary over layers for
    every source (output, logit lens, tuned lens when ``lens`` is given as ``tuned:DIR``,
    a folder or a loaded lens, linear decoders unless ``decoders=False``); position bias of the
    rotations; calibration against the oracle; the sections ``sections`` gives for the file's
    environment.

    With ``out_dir``, every chunk of the file is read against its checksum before
    anything is written: a damaged file raises :class:`belieflens.errors.CacheFileError`
    (one line) and leaves no partial report. The report is written into a folder beside
    ``out_dir`` and moved into place once whole (:func:`belieflens.report.atomic.staged`):
    a full disk, a signal or any error leaves the previous report untouched and no partial one.
    With ``html`` (the default), the viewer too (:func:`belieflens.report.viewer.study_page`).

    ``floors``: control files of the same study (``extract --init random:SEED``), checked
    before any work (one line naming a mismatch): every lens, decoder and geometry read-out
    is then shown beside its floor (:func:`belieflens.analysis.floor.floor`; geometry targets
    from ``targets``). ``statistics``: the statistic baselines' features, beside every decoder
    (:mod:`belieflens.analysis.baselines`). ``record`` (default the shipped one,
    :mod:`belieflens.analysis.power_record`): a test without shown power is marked so;
    ``more``: :class:`~belieflens.report.transfer.AnalyzeMore`.
    """
    run = _Run(_lens(lens), method, decoders, seed, sections, html, tuple(map(Path, floors)),
               targets, statistics, record=record, **more)
    if client is None:
        return run(path, out_dir, None)
    import dask

    connected = cluster.connect(client) if isinstance(client, str) else client
    try:
        with dask.config.set(scheduler=getattr(connected, "get")):  # noqa: B009 - not in the Protocol
            return run(path, out_dir, connected)
    finally:
        if isinstance(client, str):
            cluster.close(connected)


def _verify(path: str | Path, client: DaskClient | None) -> None:
    """Every chunk of every file of ``path`` read against its checksum (by the workers, one
    task per shard, with a client); the first damage found is raised here."""
    files = cache_files(path)
    if client is None:
        for f in files:
            verify_file(f)
        return
    for future in [client.submit(verify_file, f, pure=False) for f in files]:
        future.result()


@dataclass(frozen=True)
class _Run:
    """One analysis's settings, applied to a path."""

    tuned: TunedLens | None
    method: DebiasMethod
    decoders: bool
    seed: int
    sections: SectionsFor
    html: bool = True
    floors: tuple[Path, ...] = ()
    targets: TargetsFor = no_targets
    statistics: StatisticsFor = no_statistics
    checks: DecoderChecks = NO_CHECKS
    results: str | None = None
    record: Record | None = None

    def __post_init__(self) -> None:
        if (self.checks.any or self.results) and not self.decoders:
            raise ParameterError("--transfer, --own-answer and --results read the decoders: "
                                 "drop --no-decoders")
        if self.results and not self.floors:
            raise ParameterError("--results writes the comparisons beside untrained "
                                 "controls: give them with --floor")

    def __call__(self, path: str | Path, out_dir: str | Path | None,
                 client: DaskClient | None) -> Analysis:
        recorder = written.start() if self.results else None
        out = Path(out_dir) if out_dir is not None else None
        shards = Path(path).is_dir()
        if out is not None and shards:  # a study's shards, checked before they are held open
            _verify(path, client)
        ds = open_cache(path)
        try:  # nothing is written from damaged data or beside another study's floor
            check_floors(ds.attrs, self.floors, geometry=bool(self.floors)
                         and bool(self.targets(ds)))
            self.checks.check(ds, self.floors)
            if out is not None and not shards:
                verify_file(path)
        except BeliefLensError:
            ds.close()
            raise
        # verification's read buffers and the opening's copies, freed but fragmenting the
        # heap: handed back here and after each stage, so that each stage's peak starts from
        # what is held rather than from the last stage's high-water mark
        release_freed_memory()
        with staged(out) as stage:  # written whole into place, or not at all
            folder = stage.folder if stage is not None else None
            marks = marks_for(ds.attrs, self.record)
            try:
                results, extra, floors = self._results(ds, folder, out is not None, marks)
            finally:
                ds.close()
            done = _present(results, extra, folder, self.tuned, self.decoders,
                            _Shown(marks, floors))
        done = dataclasses.replace(done, files=final(stage, done.files))
        if recorder is None or self.results is None:
            return done
        md = recorder.write(self.results, RESULT_COLUMNS,
                            [row for sec in extra for row in sec.results],
                            note=_results_note(results.attrs, len(self.floors)))
        return dataclasses.replace(done, files=(*done.files, md))

    def _results(self, ds: xr.Dataset, folder: Path | None, written: bool, marks: Marks
                 ) -> tuple[xr.DataTree, list[Section], xr.Dataset | None]:
        """The study's results, its extra sections (the environment's, the floor's) and its
        floor Dataset (``None`` without floors)."""
        stats = self.statistics(ds) if self.decoders else {}
        rows = (decoder_tvd(ds, np.random.default_rng(self.seed), n_folds=DECODER_FOLDS)
                if self.decoders else None)
        release_freed_memory()
        results = study_results(ds, method=self.method, lens=self.tuned,
                                decoders=self.decoders, seed=self.seed,
                                episodes=written and self.html, statistics=stats,
                                decoder_rows=rows)
        env = str(ds.attrs.get("env_name"))
        extra = [fn(ds, folder, method=self.method) for fn in self.sections(env)]
        f = None
        if self.floors:
            f = floor(ds, self.floors, method=self.method, decoders=self.decoders,
                      seed=self.seed, targets=self.targets(ds), statistics=stats,
                      decoder_rows=rows)
            extra.append(floor_section(f, folder, marks=marks))
        if self.checks.any:
            extra += self.checks.sections(ds, self.floors, folder, mine=stats,
                                          statistics=self.statistics, seed=self.seed,
                                          method=self.method)
        return results, extra, f


def _results_note(attrs: Mapping[Any, Any], controls: int) -> str:
    """The results file's note: the study and its controls."""
    return (f"{attrs.get('model_id')} on {attrs.get('env_name')} "
            f"{_params_text(attrs.get('env_params'))}, {attrs.get('episodes')} episodes of "
            f"seed {attrs.get('seed')}, beside {controls} untrained networks; 95% intervals over "
            "episodes and the control seeds, corrected across layers (max-T); every row is "
            "one read-out beside its floor and its best statistic baseline")


@dataclass(frozen=True)
class _Texts:
    """The plain-text tables of a study's results."""

    turns: str
    lens: str
    summary: str
    bias: str
    baselines: str = ""
    """The statistic baselines beside the decoders ('' without)."""

    def titled(self, calibration: str, extra: Sequence[Section]) -> dict[str, str]:
        """Each table under the title the viewer shows it with, then ``extra``'s sections."""
        return {"Output beliefs against the oracle, per turn": self.turns,
                "Logit lens: TVD to the oracle per layer": self.lens,
                "Every read-out per layer (summary)": self.summary,
                **({"Statistic baselines beside the decoders": self.baselines}
                   if self.baselines else {}),
                "Position bias": self.bias,
                "Calibration against the oracle (ECE)": calibration,
                **{sec.title: sec.text for sec in extra}}

    @classmethod
    def of(cls, r: xr.DataTree) -> _Texts:
        return cls(format_turn_table(r["turns"].to_dataset()),
                   format_lens_table(r["lens"].to_dataset()),
                   format_summary(r["summary"].to_dataset()),
                   format_position_bias(r["position_bias"].to_dataset()),
                   format_baselines(r["baselines"].to_dataset())
                   if "baselines" in r.children else "")


@dataclass(frozen=True)
class _Shown:
    """What is shown beside each internal read-out: its test's power marks and, with
    ``--floor``, its floor."""

    marks: Marks
    floors: xr.Dataset | None = None


def _present(results: xr.DataTree, extra: Sequence[Section], out: Path | None,
             tuned: TunedLens | None, decoders: bool, shown: _Shown) -> Analysis:
    """stdout text, and with ``out`` the figures and ``report.md``, of computed results."""
    attrs = {str(k): v for k, v in results.attrs.items()}
    method = str(attrs["debias"])
    texts = _Texts.of(results)
    rel = results["calibration"].to_dataset()
    headline = _headline(results, shown)
    text = (
        f"model {attrs.get('model_id')} | env {attrs.get('env_name')} {attrs.get('env_params')}"
        f" | episodes {attrs.get('episodes')} | seed {attrs.get('seed')} | debias {method}\n\n"
        f"{texts.turns}\n{texts.lens}\n\n{texts.summary}\n"
        + (f"{texts.baselines}\n\n" if texts.baselines else "")
        + f"position bias\n{texts.bias}\n\n"
        f"calibration vs oracle, ECE: {_ece_text(rel)}\n\n{headline}\n"
    )
    for sec in extra:
        text += f"\n== {sec.title} ==\n{sec.text}\n"
    files: list[Path] = [f for sec in extra for f in sec.files]
    if out is not None:
        written = _figures(results, out, shown)
        report = out / "report.md"
        body = _markdown(attrs, texts, rel, headline, tuned, decoders)
        body += "".join(f"\n## {sec.title}\n\n{sec.markdown}\n" for sec in extra)
        report.write_text(body)
        files = [*written, *files, report]
        if "episodes" in results.children:
            page = study_page(results, texts.titled(_ece_text(rel), extra), headline,
                              out / "study.html", floors=shown.floors, marks=shown.marks)
            files.append(page.path)
            if page.files:
                files.append(page.files[0].parent)
            text += f"\nviewer {page.path.name}: {page.note}\n"
    return Analysis(text=text, headline=headline, files=tuple(files))


def _figures(results: xr.DataTree, out: Path, shown: _Shown) -> list[Path]:
    summ = results["summary"].to_dataset()
    return [
        trajectory_plot(results["turns"].to_dataset(), out / "trajectory.png"),
        lens_heatmap(results["lens"].to_dataset(), out / "lens_tvd.png"),
        source_heatmaps(summ, out / "sources_tvd.png"),
        layer_profile_plot(summ, out / "layers.png", marks=shown.marks, floors=shown.floors),
        position_bias_plot(results["position_bias"].to_dataset(), out / "position_bias.png"),
        calibration_plot(results["calibration"].to_dataset(), out / "calibration.png"),
    ]


def _headline(results: xr.DataTree, shown: _Shown) -> str:
    table, summ = results["turns"].to_dataset(), results["summary"].to_dataset()
    bias, rel = results["position_bias"].to_dataset(), results["calibration"].to_dataset()
    overall = float(table["tvd_mean"].mean(skipna=True))
    best = best_layers(summ)
    parts = [f"output TVD to oracle (mean over probes, turns, deliveries): {overall:.3f}"]
    last = int(summ["layer"].values[-1])
    for src in ("logit-lens", "tuned-lens", "decoder"):
        if src in best:
            la, v = best[src]
            parts.append(f"{src}{shown.marks.beside(src)}: closest layer {la} (TVD {v:.3f}"
                         f"{_beside(results, src)}{_floor_beside(shown.floors, src, la)})")
    lt = summ["tvd_mean"].sel(source="logit-lens", layer=last).mean(skipna=True)
    parts.append(f"logit lens at the last layer ({last}): {float(lt):.3f}")
    worst = bias["rotation_tvd_mean"].max(skipna=True)
    if not bool(worst.isnull()):
        parts.append(f"largest rotation-vs-debiased TVD: {float(worst):.3f}")
    ece = float(rel["ece"].sel(probe="all"))
    if np.isfinite(ece):
        parts.append(f"calibration error vs oracle: ECE {ece:.3f}, mean |model − oracle| "
                     f"{float(rel['mean_abs'].sel(probe='all')):.3f}")
    return "; ".join(parts)


def _floor_beside(floors: xr.Dataset | None, source: str, layer: int) -> str:
    """``; untrained floor F there; beyond it at N of L layers`` beside a read-out's closest
    layer ('' without floors)."""
    if floors is None or source not in floors["source"].values:
        return ""
    f = floors.sel(source=source)
    n = int(np.asarray(f["exceeds"].values, dtype=bool).sum())
    return (f"; untrained floor {float(f['floor_mean'].sel(layer=layer)):.3f} there; beyond "
            f"the larger of its floor and its statistic baselines at {n} of "
            f"{f.sizes['layer']} layers")


def _beside(results: xr.DataTree, source: str) -> str:
    """``; best statistic baseline NAME TVD`` beside the decoder's closest layer ('' where the
    study has no baselines)."""
    if source != "decoder" or "baselines" not in results.children:
        return ""
    per = results["baselines"].to_dataset()["tvd_mean"].mean(
        ["delivery", "probe", "turn"], skipna=True)
    if bool(per.isnull().all()):
        return ""
    name = str(per.fillna(np.inf).idxmin("baseline").values)
    return f"; best statistic baseline {name} {float(per.sel(baseline=name)):.3f}"


def _ece_text(rel: Any) -> str:
    return ", ".join(
        f"{p}={float(rel['ece'].sel(probe=p)):.3f} (mean |Δ| "
        f"{float(rel['mean_abs'].sel(probe=p)):.3f})"
        for p in rel["probe"].values
        if np.isfinite(float(rel["ece"].sel(probe=p)))
    ) or "-"


def _markdown(attrs: dict[str, Any], texts: _Texts, rel: xr.Dataset, headline: str,
              tuned: TunedLens | None, decoders: bool) -> str:
    """The study's ``report.md`` (before the environment's sections), section by section."""
    return "".join([
        _md_provenance(attrs),
        _md_guide(str(attrs["debias"]), headline),
        _md_beliefs(texts.turns),
        _md_layers(texts, _tuned_text(tuned), _decoder_text(decoders),
                   _multi_text(attrs["multi_token"] == "continuation")),
        _md_bias(texts.bias),
        _md_calibration(rel),
    ])


def _params_text(params: object) -> str:
    try:
        return json.dumps(json.loads(str(params)), indent=None)
    except ValueError:
        return str(params)


def _tuned_text(tuned: TunedLens | None) -> str:
    if tuned is None:
        return ("No tuned lens was given (`--lens tuned:DIR`), so the tuned-lens column is "
                "empty; train one with `belieflens lens train --model M --out DIR`.")
    tl = tuned.config.train
    return (
        f"A **tuned lens** trained for this model (`{tuned.config.model_id}`, "
        f"{tl.get('n_train_positions', '?')} training positions from environments "
        f"{', '.join(tl.get('envs', []))}) adds an affine translator per layer before the "
        "same head; it corrects for layers speaking a different 'basis' than the last one."
    )


def _multi_text(multi: bool) -> str:
    if multi:
        return ("Options of several tokens are scored whole: each later token is read at its "
                "own position, normalised over the stored option tokens (an approximation).")
    return ("Where an option has several tokens, only its first token is scored by the lenses "
            "(the file stores no residuals at later positions).")


def _decoder_text(decoders: bool) -> str:
    if not decoders:
        return "Linear decoders were skipped (`--no-decoders`)."
    return ("A **linear decoder** of the oracle distribution (the one estimator of every linear "
            "read-out: ridge on standardised features, its penalty chosen by nested "
            "cross-validation inside the training episodes, the prediction projected onto the "
            "simplex) is fitted per layer and per question and scored on episodes it never saw "
            "(cross-validation grouped by episode).")


def _md_provenance(attrs: dict[str, Any]) -> str:
    params_s = _params_text(attrs.get('env_params'))
    return f"""# belieflens report

**Model** `{attrs.get('model_id')}` (weights sha256 `{str(attrs.get('weights_hash'))[:12]}…`,
{attrs.get('dtype')} on {attrs.get('device')}) · **environment** `{attrs.get('env_name')}`
`{params_s}` · **episodes** {attrs.get('episodes')} · **seed** {attrs.get('seed')} ·
**created** {attrs.get('created')} · belieflens {attrs.get('belieflens_version')}
(`{attrs.get('git_commit')}`).

"""


def _md_guide(method: str, headline: str) -> str:
    return f"""## How to read this

The model is shown evidence turn by turn and, after each turn, asked questions (*probes*)
whose exact Bayesian answer (the **oracle**) is known. Each probe is a multiple-choice question
asked once per rotation of a Latin square (every answer shown at every position), then pooled
({method} mean over rotations), which cancels any preference the model has for a position.
*Turn 0* is the belief before any evidence (the prior); turn *t* follows the *t*-th
observation. **TVD** (total variation distance: 0 = identical, 1 = disjoint) measures how far a
distribution over the answers is from the oracle's; **|err|** is the absolute error of the point
estimate (E[value] for numeric or binned answers, else the probability of the first answer).
Values are means over episodes ± 1 standard error (SEM). A *delivery* is how the evidence is
given: all restated in one message (single-turn) or one message per observation (multi-turn).

**Headline:** {headline}

"""


def _md_beliefs(turn_text: str) -> str:
    return f"""## 1. Beliefs per turn

The model's pooled answer (coloured, band = ± 1 SEM over episodes) against the oracle
(dashed), per question and delivery. A model that updates like a Bayesian follows the dashed line.

![belief trajectory](trajectory.png)

```
{turn_text}
```

"""


def _md_layers(texts: _Texts, tuned_s: str, decoder_s: str, multi_s: str) -> str:
    summ_text, lens_text = texts.summary, texts.lens
    return f"""## 2. Each read-out per layer

Four read-outs of a belief, each compared with the oracle at every layer (layer 0 is the
embedding of the last prompt token; layer *L* is the output of block *L*; the last layer
is what the model outputs):

- **output**: the model's actual answer (the same at every layer; drawn for reference).
- The **logit lens** reads each layer's residual stream at the answer position through the
  model's own final norm (recomputed on that layer) and unembedding, restricted to the
  answer options, and debiases it over rotations like the output. At the last layer it
  equals the output.
- {tuned_s}
- {decoder_s}

{multi_s}

A layer where a source's TVD drops is where that read-out reads more of the oracle; a
decoder well below the lenses means the information is present but not yet in the form the
output head reads. Whether that is a belief the model formed needs two more things: the same
read-out of untrained networks of its shape and statistic baselines beside it (`--floor`),
and a test that has shown power on a known pair of this kind of study (`belieflens power`):
a read-out whose test has not is marked *no shown power*.

![TVD per layer](layers.png)

![TVD by layer and turn for each source](sources_tvd.png)

```
{summ_text}
```
{_md_baselines(texts.baselines)}
The logit lens alone, per question, averaged over turns:

![logit lens heatmap](lens_tvd.png)

```
{lens_text}
```

"""


def _md_baselines(text: str) -> str:
    if not text:
        return ""
    return f"""
Every decoder result beside the **statistic baselines**: the same estimator with the same
folds, fitted on features of the evidence the environment declares (counts, the turn, the
last few observations) instead of the residual. A decoder no better than a baseline reads
nothing the statistic does not already give.

```
{text}
```
"""


def _md_bias(bias_text: str) -> str:
    return f"""## 3. Position bias

Before pooling, each rotation gives its own answer. Left: how far each rotation's answer is
from the pooled (debiased) one — 0 would mean the model ignores where an answer is shown.
Right: for each answer slot, how much more probability the model gives it than the pooled
belief gives the answer shown there; a bar above 0 is a slot the model favours. Large values
mean a single-order evaluation would be misleading and the rotations are needed.

![position bias](position_bias.png)

```
{bias_text}
```

"""


def _md_calibration(rel: xr.Dataset) -> str:
    return f"""## 4. Calibration against the oracle

The realised outcome of a question (e.g. the next flip) is not part of a cache file, so
calibration is measured against the **oracle as truth**: the model's probabilities are binned
and, per bin, the mean oracle probability of the same answers is plotted. On the diagonal the
model is as confident as an ideal Bayesian with the same evidence; below the diagonal at high
probabilities (above it at low ones) it is over-confident. ECE is the count-weighted mean
|model − oracle| over bins. Binning averages the oracle inside a bin, so a model that answers
almost uniformly lands in one bin whose mean oracle probability is exactly 1/K, and gets an
ECE near 0 however wrong it is; **mean |Δ|**, the unbinned mean |model − oracle| over every
(question, answer) pair, does not have that blind spot: read the two together.

![calibration](calibration.png)

ECE per question: {_ece_text(rel)}
"""
