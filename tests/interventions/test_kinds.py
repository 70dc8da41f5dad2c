"""Intervention kinds register how their result is reported: the report dispatches through the
registry (a kind needs no edit of it), every options record's kind is registered, and no
module but the kind's own holds its name in its code."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import belieflens
from belieflens.errors import CacheFileError
from belieflens.report.interventions import (
    REGISTRY,
    InterventionKind,
    Metrics,
    kinds,
    register,
    report,
)
from belieflens.store.results import KIND_PREFIX, is_result
from tests.envs.test_names_stay_in_envs import PACKAGE, names_in_code


def test_every_options_record_has_a_registered_kind() -> None:
    records = (belieflens.PatchOptions, belieflens.SteerOptions, belieflens.EraseOptions,
               belieflens.InterchangeOptions)
    assert {r.kind for r in records} == set(REGISTRY)
    for kind in kinds():
        assert kind.name.startswith(KIND_PREFIX) and REGISTRY[kind.name] is kind
        assert kind.explanation.startswith("**") and kind.title


def test_no_kind_name_outside_its_own_module() -> None:
    found = []
    for kind in kinds():
        home = Path(sys.modules[kind.text.__module__].__file__ or "")
        hits = {p: names_in_code(p, {kind.name}) for p in sorted(PACKAGE.rglob("*.py"))}
        assert hits[home], f"{kind.name} is not written in {home}"
        found += [h for p, hs in hits.items() if p != home for h in hs]
    assert not found, "intervention kinds outside their own module:\n" + "\n".join(found)


def test_a_taken_kind_is_refused() -> None:
    taken = next(iter(REGISTRY.values()))
    with pytest.raises(ValueError, match="is taken"):
        register(InterventionKind(taken.name, "other", taken.metrics, taken.text,
                                  taken.headline, taken.plot, taken.payload, ""))
    assert REGISTRY[taken.name] is taken


def _mean(ds: xr.Dataset, method: str) -> Metrics:
    return {"summary": ds[["shift"]].mean("query")}


def _plot(metrics: Metrics, out: Path) -> Path:
    path = out / "shift.txt"
    path.write_text(str(float(metrics["summary"]["shift"].sum())))
    return path


@pytest.fixture()
def new_kind() -> Iterator[InterventionKind]:
    """A kind registered by a test, as a new intervention's module would; removed after."""
    kind = register(InterventionKind(
        name=KIND_PREFIX + "shift-test", title="A shift", metrics=_mean,
        text=lambda m, ds: "shift per layer " + " ".join(
            f"{v:.2f}" for v in m["summary"]["shift"].values),
        headline=lambda m: f"largest shift {float(m['summary']['shift'].max()):.2f}",
        plot=_plot, payload=lambda m, ds, method: {"summary": {}},
        explanation="**shift**: what the numbers are."))
    yield kind
    del REGISTRY[kind.name]


def test_a_registered_kind_is_reported_with_no_edit_of_the_report(
        new_kind: InterventionKind, tmp_path: Path) -> None:
    path = tmp_path / "shift.h5"
    ds = xr.Dataset({"shift": (("query", "layer"), np.array([[1.0, 2.0], [3.0, 6.0]]))},
                    attrs={"kind": new_kind.name, "model_id": "m", "study_path": "s.h5",
                           "study_fingerprint": "f" * 20})
    ds.to_netcdf(path, engine="h5netcdf")
    assert is_result(path)
    done = report(path, tmp_path / "out", html=False)
    assert done.text.startswith("== A shift ==\nmodel m | study s.h5 (fingerprint ffffffffffff)")
    assert "shift per layer 2.00 4.00" in done.text
    # a kind no known pair was run through is marked so beside its headline
    assert done.headline == ("largest shift 4.00; shift-test: no shown power: no known pair of "
                             "its kind (language model, ) was run through it")
    assert [f.name for f in done.files] == ["shift.txt", "report.md"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert md.startswith("# belieflens: a shift") and md.rstrip().endswith(new_kind.explanation)
    del REGISTRY[new_kind.name]
    with pytest.raises(CacheFileError, match="no report for intervention kind"):
        report(path)
    REGISTRY[new_kind.name] = new_kind
