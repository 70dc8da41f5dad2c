"""``belieflens analyze``: tables to stdout, PNGs and ``report.md`` into a folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.lens import lens_beliefs
from belieflens.analysis.plots import lens_heatmap, trajectory_plot
from belieflens.analysis.sections import sections_for
from belieflens.analysis.tables import (
    format_lens_table,
    format_turn_table,
    lens_table,
    turn_table,
)
from belieflens.cache.store import open_cache
from belieflens.types import DebiasMethod


@dataclass(frozen=True)
class Analysis:
    """What :func:`analyze` produced."""

    text: str
    headline: str
    files: tuple[Path, ...]


def analyze(
    path: str | Path, out_dir: str | Path | None = None, *, method: DebiasMethod = "geometric"
) -> Analysis:
    """Analyse a cache file: debiased beliefs, TVD/MAE to the oracle per turn, lens per layer."""
    ds = open_cache(path)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    try:
        beliefs = output_beliefs(ds, method=method)
        table = turn_table(beliefs)
        lens = lens_beliefs(ds, method=method)
        ltable = lens_table(lens, beliefs["oracle"], beliefs["outcome_label"])
        attrs = dict(ds.attrs)
        extra = [fn(ds, out, method=method) for fn in sections_for(str(attrs.get("env_name")))]
    finally:
        ds.close()
    turn_text = format_turn_table(table)
    lens_text = format_lens_table(ltable)
    overall = float(table["tvd_mean"].mean(skipna=True))
    best_layer = ltable["tvd_mean"].mean(["delivery", "probe", "turn"], skipna=True)
    bl = int(best_layer.idxmin("layer")) if not bool(best_layer.isnull().all()) else -1
    headline = (
        f"output TVD to oracle (mean over probes, turns, deliveries): {overall:.3f}; "
        f"lens layer closest to the oracle: {bl} "
        f"(TVD {float(best_layer.sel(layer=bl)) if bl >= 0 else float('nan'):.3f}); "
        f"last layer: {float(best_layer.isel(layer=-1)):.3f}"
    )
    text = (
        f"model {attrs.get('model_id')} | env {attrs.get('env_name')} {attrs.get('env_params')}"
        f" | episodes {attrs.get('episodes')} | seed {attrs.get('seed')} | debias {method}\n\n"
        f"{turn_text}\n{lens_text}\n\n{headline}\n"
    )
    for sec in extra:
        text += f"\n== {sec.title} ==\n{sec.text}\n"
    files: list[Path] = [f for sec in extra for f in sec.files]
    if out is not None:
        traj = trajectory_plot(table, out / "trajectory.png")
        heat = lens_heatmap(ltable, out / "lens_tvd.png")
        report = out / "report.md"
        body = _markdown(attrs, method, turn_text, lens_text, headline, table)
        body += "".join(f"\n## {sec.title}\n\n{sec.markdown}\n" for sec in extra)
        report.write_text(body)
        files = [traj, heat, *files, report]
    return Analysis(text=text, headline=headline, files=tuple(files))


def _markdown(attrs: dict[str, object], method: str, turn_text: str, lens_text: str,
              headline: str, table: object) -> str:
    params = attrs.get("env_params")
    try:
        params_s = json.dumps(json.loads(str(params)), indent=None)
    except ValueError:
        params_s = str(params)
    return f"""# belieflens report

**Model** `{attrs.get('model_id')}` (weights sha256 `{str(attrs.get('weights_hash'))[:12]}…`,
{attrs.get('dtype')} on {attrs.get('device')}) · **environment** `{attrs.get('env_name')}`
`{params_s}` · **episodes** {attrs.get('episodes')} · **seed** {attrs.get('seed')} ·
**created** {attrs.get('created')} · belieflens {attrs.get('belieflens_version')}
(`{attrs.get('git_commit')}`).

## How to read this

Each probe is a multiple-choice question asked once per rotation of a Latin square
(every answer shown at every position), then pooled ({method} mean over rotations), which
cancels any preference the model has for a position. *Turn 0* is the belief before any
evidence (the prior); turn *t* follows the *t*-th observation. The **oracle** is the exact
Bayesian answer. **TVD** (total variation distance, 0 = identical, 1 = disjoint) measures how
far the model's distribution is from the oracle's; **|err|** is the absolute error of the
point estimate (E[value] for numeric or binned outcomes, else the probability of the first
outcome). Values are means over episodes ± 1 standard error.

**Headline:** {headline}

## Beliefs per turn

![belief trajectory](trajectory.png)

```
{turn_text}
```

## Where in the network: the logit lens

Each layer's residual stream at the answer position is read through the model's final norm
(recomputed on that layer) and unembedding, restricted to the answer options, and debiased
like the output. Layer 0 is the embedding; the last layer reproduces the output.

![lens TVD heatmap](lens_tvd.png)

```
{lens_text}
```
"""


