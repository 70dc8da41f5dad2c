"""Running a gate file: every model on every held-out condition, the read-outs a taught model
saw left out, the measures and the verdicts.

:func:`run_gates` checks the file's freeze (:func:`belieflens.train.gates.frozen_at`) and that
each adapter is the one frozen (its weights' SHA-256), then extracts each condition's episodes
for each model into ``out`` (a file already there is reused, so a stopped run resumes), leaves
out every read-out whose prompt any of the file's adapters was taught on (for every model
alike: each is read on the same read-outs), and measures each model against the oracle and
against its own target (:func:`belieflens.analysis.updating.updating`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import xarray as xr

from belieflens.analysis.beliefs import output_beliefs
from belieflens.analysis.updating import leave_out, updating
from belieflens.dims import EPISODE, PROBE
from belieflens.envs import get as get_env
from belieflens.episodes.capabilities import Temperable
from belieflens.errors import ParameterError
from belieflens.model.load import LoadedModel, resolve
from belieflens.run.extract import ExtractOptions
from belieflens.run.job import ExtractJob, Models, Runtime
from belieflens.run.lifecycle import Extraction
from belieflens.store.cache import open_cache
from belieflens.train.gates import (
    CONDITION,
    MODEL,
    GateFile,
    ModelEntry,
    Verdict,
    all_met,
    frozen_at,
    load_gate_file,
    stack,
    verdicts,
)
from belieflens.train.teach import trained_prompts
from belieflens.train.tempered import tempered_oracle


@dataclass(frozen=True)
class GateRun:
    """What :func:`run_gates` found: the file, its freeze, the measures and the verdicts."""

    gates: GateFile
    commit: str
    date: str
    measures: xr.Dataset
    """Dims ``model``, ``condition``, ``delivery`` (and ``turn`` for ``step_slope``), with
    ``dropped`` and ``kept``: the read-outs left out as taught, and those measured."""
    verdicts: list[Verdict]

    @property
    def met(self) -> bool:
        """Whether every gate is met (reports decide nothing)."""
        return all_met(self.verdicts)

    MEASURE_COLUMNS: ClassVar[tuple[str, ...]] = (
        "model", "condition", "delivery", "slope [95%]", "TVD to oracle", "TVD to target",
        "step R²", "read-outs dropped", "kept")
    VERDICT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "verdict", "model", "check", "condition", "delivery", "value")

    def measure_rows(self) -> list[tuple[str, ...]]:
        """One row per model, condition and delivery (:attr:`MEASURE_COLUMNS`)."""
        m, rows = self.measures, list[tuple[str, ...]]()
        for model, cond, d in itertools.product(m[MODEL].values, m[CONDITION].values,
                                                m["delivery"].values):
            at = {MODEL: model, CONDITION: cond, "delivery": d}
            v = {k: float(m[k].sel({x: at[str(x)] for x in m[k].dims}))
                 for k in ("slope", "slope_lo", "slope_hi", "tvd_oracle", "tvd_target",
                           "step_r2", "dropped", "kept")}
            rows.append((str(model), str(cond), str(d),
                         f"{v['slope']:.3f} [{v['slope_lo']:.3f}, {v['slope_hi']:.3f}]",
                         f"{v['tvd_oracle']:.4f}", f"{v['tvd_target']:.4f}",
                         f"{v['step_r2']:.3f}", f"{v['dropped']:.0f}", f"{v['kept']:.0f}"))
        return rows

    def verdict_rows(self) -> list[tuple[str, ...]]:
        """One row per check, condition and delivery (:attr:`VERDICT_COLUMNS`)."""
        return [(("met" if x.met else "NOT met") if x.check.gated else "reported",
                 x.check.model, x.check.describe(), x.condition, x.delivery, x.value)
                for x in self.verdicts]

    def table(self) -> str:
        """The measures, then every verdict, as text."""
        def text(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
            widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
            return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                    for row in (columns, *rows)]

        head = (f"{self.gates.name}: {self.gates.path}, frozen at {self.commit[:12]} "
                f"({self.date})")
        return "\n".join([head, "", *text(self.MEASURE_COLUMNS, self.measure_rows()), "",
                          *text(self.VERDICT_COLUMNS, self.verdict_rows()), "",
                          "every gate met" if self.met else "a gate is NOT met"])


def weights_sha256(folder: Path) -> str:
    """SHA-256 of an adapter folder's ``adapter_model.safetensors``."""
    return hashlib.sha256((folder / "adapter_model.safetensors").read_bytes()).hexdigest()


def _adapter(entry: ModelEntry, gates: GateFile) -> Path | None:
    """The adapter folder of ``entry`` (``None`` for a model that is not one), checked to be
    the adapter the file froze."""
    source = resolve(entry.model)
    if source.kind != "adapter":
        return None
    found = weights_sha256(source.path)
    if found != entry.weights_sha256:
        raise ParameterError(
            f"{entry.model} is not the adapter {gates.path} froze (weights SHA-256 {found[:12]}, "
            f"the file says {entry.weights_sha256[:12] or 'nothing'}): a retaught adapter needs "
            "new gate seeds in a new gate file")
    return source.path


def _extract(gates: GateFile, model: LoadedModel, params: dict[str, Any], seed: int,
             episodes: int, out: Path, threads: int) -> Path:
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    env = get_env(gates.env, **params)
    job = ExtractJob(env, Models(model), Runtime(out),
                     ExtractOptions.of(episodes=episodes, seed=seed, threads=threads))
    return Extraction(job, None).run()


def condition_beliefs(gates: GateFile, entry: ModelEntry, model: LoadedModel | None,
                      condition: str, keys: frozenset[str], out: Path, threads: int = 1, *,
                      where: Callable[[dict[str, Any]], bool] | None = None
                      ) -> tuple[xr.Dataset, xr.DataArray, int, int]:
    """A model's debiased beliefs on every parameter set of ``condition`` (episodes numbered
    on), its target on them, and the read-outs dropped and kept.

    ``where`` keeps only the parameter sets it accepts (a grid's factor, say); with ``model``
    ``None`` the studies must be in ``out`` already (a gate run's folder), else one line.
    """
    parts, targets, dropped, kept = [], [], 0, 0
    offset = 0
    for j, (params, seed, episodes) in enumerate(gates.episodes_of(condition)):
        if where is not None and not where(params):
            continue
        path = out / _safe(entry.label) / f"{condition}-{j}.h5"
        if model is not None:
            _extract(gates, model, params, seed, episodes, path, threads)
        elif not path.exists():
            raise ParameterError(f"{path}: not there (run the gates into {out} first)")
        ds = open_cache(path)
        beliefs, d, k = leave_out(output_beliefs(ds), ds, keys)
        env = get_env(gates.env, **params)
        assert isinstance(env, Temperable)
        target = tempered_oracle(env, beliefs, episodes=episodes, seed=seed,
                                 strength=entry.strength)
        renumber = {EPISODE: beliefs[EPISODE].values + offset}
        parts.append(beliefs.sel({PROBE: [gates.probe]}).assign_coords(renumber))
        targets.append(target.sel({PROBE: [gates.probe]}).assign_coords(renumber))
        offset += episodes
        dropped, kept = dropped + d, kept + k
    if kept == 0:
        raise ParameterError(f"condition {condition!r}: every read-out of {entry.model} was "
                             f"taught ({dropped} dropped), so nothing is held out")
    both = xr.concat(parts, dim=EPISODE, join="outer", data_vars="minimal",
                     compat="override", coords="minimal")
    return both, xr.concat(targets, dim=EPISODE, join="outer"), dropped, kept


def taught_keys(gates: GateFile) -> frozenset[str]:
    """The prompt keys every taught model of ``gates`` saw (its adapters checked against the
    frozen weight hashes): the read-outs every gate leaves out, for all models."""
    folders = [_adapter(m, gates) for m in gates.models.values()]
    return frozenset().union(*(trained_prompts(f) for f in folders if f is not None))


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in label)


def run_gates(path: str | os.PathLike[str], out: str | os.PathLike[str], *, threads: int = 1,
              load: Callable[[str], LoadedModel],
              on_progress: Callable[[str], None] | None = None) -> GateRun:
    """Read the gate file ``path`` (frozen, its adapters the ones frozen), run every model on
    every condition into ``out``, and measure and judge them. ``load`` loads a model spec."""
    gates = load_gate_file(path)
    commit, date = frozen_at(gates.path)
    keys = taught_keys(gates)
    rows = []
    for label, entry in gates.models.items():
        model = load(entry.model)
        for condition in gates.conditions:
            if on_progress is not None:
                on_progress(f"{label} on {condition}")
            beliefs, target, dropped, kept = condition_beliefs(
                gates, entry, model, condition, keys, Path(out), threads)
            m = updating(beliefs, target).sel({PROBE: gates.probe}, drop=True)
            rows.append(m.assign(dropped=dropped, kept=kept).expand_dims(
                {MODEL: [label], CONDITION: [condition]}))
    measures = stack(rows)
    found = verdicts(measures, gates.checks)
    _save(Path(out), gates, commit, measures, found)
    return GateRun(gates, commit, date, measures, found)


def _save(out: Path, gates: GateFile, commit: str, measures: xr.Dataset,
          found: list[Verdict]) -> None:
    """``measures.nc`` and ``verdicts.json`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    measures.to_netcdf(out / "measures.nc", engine="h5netcdf")
    rows = [{"model": v.check.model, "check": v.check.describe(), "gated": v.check.gated,
             "condition": v.condition, "delivery": v.delivery, "value": v.value, "met": v.met}
            for v in found]
    (out / "verdicts.json").write_text(json.dumps(
        {"gate_file": str(gates.path), "frozen_at": commit, "verdicts": rows}, indent=1) + "\n")
