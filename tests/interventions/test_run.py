"""The one wrapper every intervention runs through (``intervene``), its options records and
the selection record they share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import belieflens
from belieflens.errors import ParameterError
from belieflens.interventions import (
    EraseOptions,
    Intervention,
    Pair,
    PatchOptions,
    Selection,
    SteerOptions,
    intervene,
    pair_instances,
    read_study,
)


def test_the_options_records_are_interventions() -> None:
    records: list[Intervention] = [PatchOptions(), SteerOptions(), EraseOptions()]
    assert [r.kind for r in records] == [
        "intervention-patch", "intervention-steer", "intervention-erase"]
    assert [r.need for r in records] == [(), ("resid",), ("resid",)]


@pytest.mark.parametrize(("make", "message"), [
    (lambda: SteerOptions(at="before"),  # type: ignore[arg-type]
     "option '--at' = 'before' is not allowed: one of answer, after-evidence"),
    (lambda: EraseOptions(at="before"),  # type: ignore[arg-type]
     "option '--at' = 'before' is not allowed: one of answer, all"),
    (lambda: EraseOptions(n_folds=1), "option '--folds' = 1 is not allowed: >= 2"),
    (lambda: SteerOptions(batch_size=0), "option '--batch-size' = 0 is not allowed: >= 1"),
    (lambda: PatchOptions(batch_pairs=0), "option '--batch-size' = 0 is not allowed: >= 1"),
])
def test_each_options_record_checks_its_options(make: Any, message: str) -> None:
    with pytest.raises(ParameterError) as e:
        make()
    assert str(e.value) == message


def test_bad_input_is_refused_before_the_model_loads(tiny_study: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.h5"
    with pytest.raises(ParameterError, match="'--device' = 'tpu'"):
        intervene(tiny_study, SteerOptions(), out=out, device="tpu")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="holds no read-out"):
        belieflens.erase(tiny_study, out=out, select=Selection(turns=(99,)), model="nope")
    with pytest.raises(ParameterError, match="pairs episodes with each other"):
        belieflens.patch(tiny_study, out=out, select=Selection(episodes=(0,)), model="nope")
    assert not out.exists()


def test_the_selection_names_the_same_read_outs_for_every_intervention(
    tiny_study: Path,
) -> None:
    study = read_study(tiny_study)
    select = Selection(turns=(2,), deliveries=("multi-turn",))
    rows = set(select.rows(study).tolist())
    assert rows == set(np.flatnonzero(select.mask(study)).tolist())
    pairs = pair_instances(study, select)
    assert pairs and {q for p in pairs for q in (p.base, p.source)} <= rows


def test_patch_records_its_options_as_before(tiny_model: Any, tiny_study: Path,
                                             tmp_path: Path) -> None:
    """The result's ``option_*`` attributes are those of the wrapper patch had before, with
    the pairing and the untrained networks beside them (a turn-0 pair has no evidence to
    patch, so the position sets are the answer's and all)."""
    out = belieflens.patch(tiny_study, out=tmp_path / "p.h5", model=tiny_model,
                           select=Selection(turns=(1,)),
                           options=PatchOptions(layers=(0,), positions=("answer", "all"),
                                                pairs=(Pair(0, 0),)))
    with h5py.File(out, "r") as h:
        names = sorted(k for k in h.attrs if k.startswith("option_"))
        assert names == sorted(f"option_{k}" for k in (
            "layers", "positions", "batch_pairs", "reuse", "pairing", "untrained", "turns",
            "probes", "deliveries", "explicit_pairs"))
        assert h.attrs["option_explicit_pairs"] == 1 and h.attrs["option_turns"] == "1"
        assert h["patched_logprob"].shape[0] == 1
