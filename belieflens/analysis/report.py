"""``belieflens analyze``: tables to stdout, PNGs and ``report.md`` into a folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.calibration import reliability
from belieflens.analysis.lens import has_continuations, lens_beliefs
from belieflens.analysis.plots import (
    calibration_plot,
    layer_profile_plot,
    lens_heatmap,
    position_bias_plot,
    source_heatmaps,
    trajectory_plot,
)
from belieflens.analysis.position_bias import format_position_bias, position_bias
from belieflens.analysis.sections import sections_for
from belieflens.analysis.summary import PROBE_FOLDS, PROBE_LAM, probe_tvd, summary
from belieflens.analysis.tables import (
    best_layers,
    format_lens_table,
    format_summary,
    format_turn_table,
    lens_table,
    turn_table,
)
from belieflens.errors import CacheFileError
from belieflens.heap import release_freed_memory
from belieflens.lens.tuned import TunedLens, load_tuned_lens, parse_lens_spec
from belieflens.run import cluster
from belieflens.run.cluster import DaskClient
from belieflens.store.integrity import verify_file
from belieflens.store.study import cache_files, open_cache
from belieflens.types import DebiasMethod


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
    probes: bool = True,
    seed: int = 0,
    client: DaskClient | str | None = None,
) -> Analysis:
    """Analyse a cache file, or a study directory of shards (one dask-backed dataset, read
    chunk by chunk: the analysis's memory is bounded by chunks, not by the study).

    With ``client`` (a :class:`distributed.Client` or a ``--cluster`` value: ``local[:N]``,
    ``tcp://HOST:PORT``, ``PATH/scheduler.json``), the dask work runs on that cluster: the
    shards' checksums are verified by the workers, one task per shard, the lens scores
    are computed there chunk by chunk (only ``[query, layer, option]`` comes back), and the
    linear probes are fitted there, one task per layer group (only their held-out TVDs per
    row and layer come back).

    Debiased beliefs and their TVD/MAE to the oracle per turn; the summary over layers for
    every source (output, logit lens, tuned lens when ``lens`` is given as ``tuned:DIR``,
    a folder or a loaded lens, linear probes unless ``probes=False``); position bias of the
    rotations; calibration against the oracle; environment-specific sections.

    With ``out_dir``, every chunk of the file is read against its checksum before
    anything is written: a damaged file raises :class:`CacheFileError` (one line) and
    leaves no partial report.
    """
    if client is None:
        return _analyze(path, out_dir, method=method, lens=lens, probes=probes, seed=seed,
                        client=None)
    import dask

    connected = cluster.connect(client) if isinstance(client, str) else client
    try:
        with dask.config.set(scheduler=getattr(connected, "get")):  # noqa: B009 - not in the Protocol
            return _analyze(path, out_dir, method=method, lens=lens, probes=probes, seed=seed,
                            client=connected)
    finally:
        if isinstance(client, str):
            cluster.close(connected)


def _analyze(
    path: str | Path,
    out_dir: str | Path | None,
    *,
    method: DebiasMethod,
    lens: str | Path | TunedLens | None,
    probes: bool,
    seed: int,
    client: DaskClient | None,
) -> Analysis:
    tuned = _lens(lens)
    out = Path(out_dir) if out_dir is not None else None
    shards = Path(path).is_dir()
    if out is not None and shards:  # a study's shards, checked before they are held open
        shard_files = cache_files(path)
        if client is None:
            for f in shard_files:
                verify_file(f)
        else:  # one task per shard on the workers; the first damage found is raised here
            for future in [client.submit(verify_file, f, pure=False) for f in shard_files]:
                future.result()
    ds = open_cache(path)
    if out is not None:
        try:  # nothing is written from damaged data: every chunk is checked first
            if not shards:
                verify_file(path)
        except CacheFileError:
            ds.close()
            raise
        out.mkdir(parents=True, exist_ok=True)
    # verification's read buffers and the opening's copies, freed but fragmenting the heap:
    # handed back here and after each stage, so that each stage's peak starts from what is
    # held rather than from the last stage's high-water mark (bench/analysis_stages.py)
    release_freed_memory()
    try:
        if tuned is not None:
            tuned.check_file(ds)
        # the probe fits are the analysis's memory peak: run them before the other results
        # are held, as summary would run them (its defaults: seed's generator, folds, lam)
        rows = probe_tvd(ds, np.random.default_rng(seed), n_folds=PROBE_FOLDS,
                         lam=PROBE_LAM) if probes else None
        release_freed_memory()
        # the lens next, its [query, layer, option] scores and chunk tasks the next peak:
        # before the output beliefs and their tables are held too
        logit = lens_beliefs(ds, method=method)
        release_freed_memory()
        beliefs = output_beliefs(ds, method=method)
        table = turn_table(beliefs)
        ltable = lens_table(logit, beliefs["oracle"], beliefs["outcome_label"])
        summ = summary(ds, tuned, method=method, probes=probes, seed=seed, logit_lens=logit,
                       probe_rows=rows)
        release_freed_memory()
        bias = position_bias(ds, method=method)
        rel = reliability(beliefs)
        multi = has_continuations(ds)
        attrs = dict(ds.attrs)
        extra = [fn(ds, out, method=method) for fn in sections_for(str(attrs.get("env_name")))]
    finally:
        ds.close()
    turn_text = format_turn_table(table)
    lens_text = format_lens_table(ltable)
    summ_text = format_summary(summ)
    bias_text = format_position_bias(bias)
    headline = _headline(table, summ, bias, rel)
    text = (
        f"model {attrs.get('model_id')} | env {attrs.get('env_name')} {attrs.get('env_params')}"
        f" | episodes {attrs.get('episodes')} | seed {attrs.get('seed')} | debias {method}\n\n"
        f"{turn_text}\n{lens_text}\n\n{summ_text}\nposition bias\n{bias_text}\n\n"
        f"calibration vs oracle, ECE: {_ece_text(rel)}\n\n{headline}\n"
    )
    for sec in extra:
        text += f"\n== {sec.title} ==\n{sec.text}\n"
    files: list[Path] = [f for sec in extra for f in sec.files]
    if out is not None:
        written = [
            trajectory_plot(table, out / "trajectory.png"),
            lens_heatmap(ltable, out / "lens_tvd.png"),
            source_heatmaps(summ, out / "sources_tvd.png"),
            layer_profile_plot(summ, out / "layers.png"),
            position_bias_plot(bias, out / "position_bias.png"),
            calibration_plot(rel, out / "calibration.png"),
        ]
        report = out / "report.md"
        body = _markdown(attrs, method, turn_text, lens_text, summ_text, bias_text, rel,
                         headline, tuned, probes, multi)
        body += "".join(f"\n## {sec.title}\n\n{sec.markdown}\n" for sec in extra)
        report.write_text(body)
        files = [*written, *files, report]
    return Analysis(text=text, headline=headline, files=tuple(files))


def _headline(table: Any, summ: Any, bias: Any, rel: Any) -> str:
    overall = float(table["tvd_mean"].mean(skipna=True))
    best = best_layers(summ)
    parts = [f"output TVD to oracle (mean over probes, turns, deliveries): {overall:.3f}"]
    last = int(summ["layer"].values[-1])
    for src in ("logit-lens", "tuned-lens", "probe"):
        if src in best:
            la, v = best[src]
            parts.append(f"{src}: closest layer {la} (TVD {v:.3f})")
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


def _ece_text(rel: Any) -> str:
    return ", ".join(
        f"{p}={float(rel['ece'].sel(probe=p)):.3f} (mean |Δ| "
        f"{float(rel['mean_abs'].sel(probe=p)):.3f})"
        for p in rel["probe"].values
        if np.isfinite(float(rel["ece"].sel(probe=p)))
    ) or "-"


def _markdown(attrs: dict[str, object], method: str, turn_text: str, lens_text: str,
              summ_text: str, bias_text: str, rel: Any, headline: str,
              tuned: TunedLens | None, probes: bool, multi: bool) -> str:
    params = attrs.get("env_params")
    try:
        params_s = json.dumps(json.loads(str(params)), indent=None)
    except ValueError:
        params_s = str(params)
    if tuned is not None:
        tl = tuned.config.train
        tuned_s = (
            f"A **tuned lens** trained for this model (`{tuned.config.model_id}`, "
            f"{tl.get('n_train_positions', '?')} training positions from environments "
            f"{', '.join(tl.get('envs', []))}) adds an affine translator per layer before the "
            "same head; it corrects for layers speaking a different 'basis' than the last one."
        )
    else:
        tuned_s = ("No tuned lens was given (`--lens tuned:DIR`), so the tuned-lens column is "
                   "empty; train one with `belieflens lens train --model M --out DIR`.")
    multi_s = (
        "Options of several tokens are scored whole: each later token is read at its own "
        "position, normalised over the stored option tokens (an approximation)."
        if multi else
        "Where an option has several tokens, only its first token is scored by the lenses "
        "(the file stores no residuals at later positions)."
    )
    probe_s = (
        "A **linear probe** (multinomial logistic regression with the oracle distribution as a "
        "soft target) is fitted per layer and per question and scored on episodes it never saw "
        "(cross-validation grouped by episode)."
        if probes else "Linear probes were skipped (`--no-probes`)."
    )
    return f"""# belieflens report

**Model** `{attrs.get('model_id')}` (weights sha256 `{str(attrs.get('weights_hash'))[:12]}…`,
{attrs.get('dtype')} on {attrs.get('device')}) · **environment** `{attrs.get('env_name')}`
`{params_s}` · **episodes** {attrs.get('episodes')} · **seed** {attrs.get('seed')} ·
**created** {attrs.get('created')} · belieflens {attrs.get('belieflens_version')}
(`{attrs.get('git_commit')}`).

## How to read this

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

## 1. Beliefs per turn

The model's pooled answer (coloured, band = ± 1 SEM over episodes) against the oracle
(dashed), per question and delivery. A model that updates like a Bayesian follows the dashed line.

![belief trajectory](trajectory.png)

```
{turn_text}
```

## 2. Where in the network the belief forms

Four read-outs of a belief, each compared with the oracle at every layer (layer 0 is the
embedding of the last prompt token; layer *L* is the output of block *L*; the last layer
is what the model outputs):

- **output**: the model's actual answer (the same at every layer; drawn for reference).
- The **logit lens** reads each layer's residual stream at the answer position through the
  model's own final norm (recomputed on that layer) and unembedding, restricted to the
  answer options, and debiases it over rotations like the output. At the last layer it
  equals the output.
- {tuned_s}
- {probe_s}

{multi_s}

A layer where a source's TVD drops is where that read-out starts to carry the belief; a
probe well below the lenses means the information is present but not yet in the form the
output head reads.

![TVD per layer](layers.png)

![TVD by layer and turn for each source](sources_tvd.png)

```
{summ_text}
```

The logit lens alone, per question, averaged over turns:

![logit lens heatmap](lens_tvd.png)

```
{lens_text}
```

## 3. Position bias

Before pooling, each rotation gives its own answer. Left: how far each rotation's answer is
from the pooled (debiased) one — 0 would mean the model ignores where an answer is shown.
Right: for each answer slot, how much more probability the model gives it than the pooled
belief gives the answer shown there; a bar above 0 is a slot the model favours. Large values
mean a single-order evaluation would be misleading and the rotations are needed.

![position bias](position_bias.png)

```
{bias_text}
```

## 4. Calibration against the oracle

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
