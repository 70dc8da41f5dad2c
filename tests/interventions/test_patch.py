"""Interchange patching on the tiny random model: identities that pin the engine down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr

from belieflens.api import patch
from belieflens.errors import ParameterError
from belieflens.interventions.pairs import Pair, check_aligned, pair_instances, parse_pair
from belieflens.interventions.patch import PatchOptions, patch_logprobs
from belieflens.interventions.readouts import Selection, read_study
from belieflens.readouts.render import SUMMARY


@pytest.fixture(scope="module")
def patched(tiny_model: Any, tiny_study: Path) -> xr.Dataset:
    study = read_study(tiny_study)
    pairs = pair_instances(study, Selection(turns=(1, 2)))[:6]
    return patch_logprobs(tiny_model, study, pairs)


def test_pairs_are_aligned_and_differ(tiny_study: Path) -> None:
    study = read_study(tiny_study)
    pairs = pair_instances(study)
    assert pairs
    t = study.table
    for p in pairs:
        b, s = study.queries[p.base], study.queries[p.source]
        assert b.option_ids == s.option_ids and b.context_ids != s.context_ids
        assert b.context_ids[-1] == s.context_ids[-1]
        for name in ("turn", "rotation", "probe", "delivery"):
            assert t[name].values[p.base] == t[name].values[p.source]
        assert t["episode"].values[p.base] != t["episode"].values[p.source]


def test_all_positions_at_layer_0_reproduce_the_source(patched: xr.Dataset) -> None:
    got = patched["patched_logprob"].sel(layer=0, positions="all").values
    np.testing.assert_allclose(got, patched["source_logprob"].values, atol=1e-4)


def test_answer_position_at_last_layer_reproduces_the_source(patched: xr.Dataset) -> None:
    last = int(patched["layer"].values[-1])
    got = patched["patched_logprob"].sel(layer=last, positions="answer").values
    np.testing.assert_allclose(got, patched["source_logprob"].values, atol=1e-4)


def test_clean_runs_reproduce_the_study(patched: xr.Dataset) -> None:
    np.testing.assert_allclose(patched["base_logprob"].values,
                               patched["study_option_logprob"].values, atol=1e-4)


def test_self_patch_changes_nothing(tiny_model: Any, tiny_study: Path) -> None:
    study = read_study(tiny_study)
    pairs = [Pair(q, q) for q in (4, 5, 30)]
    ds = patch_logprobs(tiny_model, study, pairs)
    base = ds["base_logprob"].values[:, None, None, :]
    np.testing.assert_allclose(ds["patched_logprob"].values,
                               np.broadcast_to(base, ds["patched_logprob"].shape), atol=1e-5)
    n_evidence = [sum(c >= 1 or c == SUMMARY for c in study.queries[q].spans) for q in (4, 5, 30)]
    assert ds["n_patched"].sel(positions="evidence").values.tolist() == n_evidence
    assert min(n_evidence) >= 1  # the flips are marked evidence


def test_reuse_equals_full_forwards(tiny_model: Any, tiny_study: Path) -> None:
    study = read_study(tiny_study)
    pairs = pair_instances(study, Selection(turns=(2,)))[:3]
    fast = patch_logprobs(tiny_model, study, pairs, PatchOptions(batch_pairs=2))
    slow = patch_logprobs(tiny_model, study, pairs, PatchOptions(reuse=False))
    np.testing.assert_allclose(fast["patched_logprob"].values, slow["patched_logprob"].values,
                               atol=1e-5, rtol=1e-6)  # the random model's log-probs reach
    # -70, where float32's rounding alone is 4e-6 (other shapes, other summation order)
    moved = fast["patched_logprob"].values - fast["base_logprob"].values[:, None, None, :]
    assert np.nanmax(np.abs(moved)) > 1e-3  # the patches changed something


def test_misaligned_pairs_are_refused_naming_the_first(tiny_study: Path) -> None:
    import dataclasses

    from belieflens.interventions.align import why_unaligned

    study = read_study(tiny_study)
    a, b = 0, 1  # query 1 reads other option tokens: no role is shared at the answer
    other = dataclasses.replace(study.queries[b], option_ids=tuple(
        tuple(t + 1 for t in o) for o in study.queries[b].option_ids))
    study = dataclasses.replace(study, queries=(study.queries[0], other, *study.queries[2:]))
    assert why_unaligned(study.queries[a], other) == "their option continuations differ"
    with pytest.raises(ParameterError, match=r"^pair 1 \(base query 0, source query "
                       rf"{b}\) cannot be aligned by role: "):
        check_aligned(study, [Pair(a, a), Pair(a, b), Pair(b, a)])
    with pytest.raises(ParameterError, match="not in the study"):
        check_aligned(study, [Pair(0, 10_000)])


def test_parse_pair() -> None:
    assert parse_pair("3:7") == Pair(3, 7)
    for bad in ("3", "a:b", "1:2:3"):
        with pytest.raises(ParameterError, match="BASE:SOURCE"):
            parse_pair(bad)


def test_patch_writes_a_file_plain_xarray_opens(tiny_model: Any, tiny_study: Path,
                                                tmp_path: Path) -> None:
    out = tmp_path / "patch.h5"
    patch(tiny_study, out=out, model=tiny_model, select=Selection(turns=(1,)),
          options=PatchOptions(layers=(0, 2)))
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.attrs["kind"] == "intervention-patch"
        with xr.open_dataset(tiny_study, engine="h5netcdf") as st:
            assert ds.attrs["study_fingerprint"] == st.attrs["study_fingerprint"]
        assert ds["patched_logprob"].dims == ("pair", "layer", "positions", "option")
        assert list(ds["positions"].values) == ["answer", "evidence", "all"]
        assert list(ds["layer"].values) == [0, 2]
        assert ds["base_query"].dims == ("pair",) and ds["source_query"].dims == ("pair",)
        assert ds.attrs["model_id"] == "tiny-random"
    with h5py.File(out, "r") as h:
        assert h["patched_logprob"].fletcher32 and h["base_query"].fletcher32
    with pytest.raises(ParameterError, match="exists"):
        patch(tiny_study, out=out, model=tiny_model, select=Selection(turns=(1,)))
    with pytest.raises(ParameterError, match="'--layers' = 9"):
        patch(tiny_study, out=tmp_path / "x.h5", model=tiny_model,
              options=PatchOptions(layers=(9,)))
    assert not (tmp_path / "x.h5").exists()


def test_contexts_of_different_lengths_align_by_role(tiny_model: Any, tiny_study: Path) -> None:
    """Issue 31: pairs whose contexts differ in length were refused, so patching kept a
    length-selected subset. Aligned by role, the answer position meets the answer position:
    patched there at the last layer the base reads exactly the source's output; the base
    positions with no counterpart are listed and never patched."""
    import dataclasses

    study = read_study(tiny_study)
    pair = pair_instances(study, Selection(turns=(2,)))[0]
    base = study.queries[pair.base]
    ids = base.context_ids
    k = len(ids) // 2  # one extra token in the middle of the base's evidence
    sp = base.spans
    longer = dataclasses.replace(base, context_ids=(*ids[:k], ids[k], *ids[k:]),
                                 spans=(*sp[:k], sp[k], *sp[k:]))
    queries = tuple(longer if i == pair.base else q for i, q in enumerate(study.queries))
    study = dataclasses.replace(study, queries=queries)
    check_aligned(study, [pair])
    last = tiny_model.info.n_layers
    ds = patch_logprobs(tiny_model, study, [pair],
                        PatchOptions(layers=(0, last), positions=("answer", "all")))
    np.testing.assert_allclose(ds["patched_logprob"].sel(layer=last, positions="answer").values,
                               ds["source_logprob"].values, atol=1e-4)
    unaligned = [int(x) for x in str(ds["unaligned_positions"].values[0]).split(",")]
    assert int(ds["n_unaligned"].values[0]) == len(unaligned) >= 1
    assert len(ids) not in unaligned  # the answer position always has its counterpart
    n_all = int(ds["n_patched"].sel(positions="all").values[0])
    assert n_all == len(longer.context_ids) - len(unaligned)
    assert ds.attrs["pairs_same_length"] == 0 and ds.attrs["pairs_gained"] == 1
