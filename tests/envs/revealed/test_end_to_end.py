"""End to end on the embedded model: a few grid points of each revealed-belief environment,
both read-outs extracted into one cache file, then the analysis section."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import belieflens
import belieflens.envs as envs
from belieflens.api import analyze
from belieflens.envs.revealed.readouts import readouts
from belieflens.envs.revealed.report import revealed_section
from belieflens.envs.revealed.summary import VARIANT, summarise, table
from belieflens.model.load import LoadedModel
from belieflens.run.extract import ExtractOptions
from belieflens.run.lifecycle import write_cache

pytestmark = pytest.mark.real_model

# env, params, episodes, variants expected, whether some grid point has a unique mode,
# whether some grid point is uniform (position-bias rows)
CASES: list[tuple[str, dict[str, object], int, list[str], bool, bool]] = [
    ("dice", {"dice": 2, "faces": 4, "stated": "first", "style": "belieflens"}, 2,
     ["single", "independent"], True, False),
    ("coins", {"coins": 2, "focus": "Heads", "bias": 3, "stated": "first"}, 2,
     ["regular", "independent"], True, False),
    ("preference", {"pair": "left-right", "order": "forward", "focus": "first",
                    "variant": "regular", "stated": "first"}, 3, ["regular"], True, True),
    ("choice", {"options": 2, "stated": "first"}, 2, ["regular", "independent"], False, True),
    ("case-study", {"case": "clinic", "share": 30, "stated": "first"}, 2, ["marginal", "child"],
     True, False),
]


@pytest.mark.parametrize(("name", "params", "n", "variants", "has_mode", "has_uniform"), CASES,
                         ids=[c[0] for c in CASES])
def test_extract_and_analyse(
    smol_model: LoadedModel, tmp_path: Path, name: str, params: dict[str, object], n: int,
    variants: list[str], has_mode: bool, has_uniform: bool, unrendered_figures: None,
) -> None:
    env = envs.get(name, **params)
    path = write_cache(env, smol_model, tmp_path / f"{name}.h5", ExtractOptions(episodes=n))
    ds = belieflens.open_cache(path)
    try:
        # both read-outs in one file, told apart by the probe coordinate
        probes = np.asarray(ds["probe"].values).astype(str)
        assert (probes == "revealed").sum() == n and (probes == "stated").sum() == 5 * n
        r = readouts(ds)
        s = summarise(r)
        section = revealed_section(ds, tmp_path, method="geometric")
    finally:
        ds.close()
    # read-outs are distributions: revealed over the outcomes, stated over five candidates
    assert np.allclose(r.revealed.sum("outcome"), 1.0, atol=1e-6)
    assert np.allclose(r.stated.sum("outcome"), 1.0, atol=1e-6)
    assert r.stated.sizes["outcome"] == 5
    assert r.revealed_lens is not None and r.revealed_lens.sizes["layer"] == 31
    rows = [*variants, "all"] if len(variants) > 1 else variants
    assert list(s["distance"].to_dataset()[VARIANT].values) == rows
    for m in ("chebyshev", "l1", "sym_kl"):
        v = s["distance"].to_dataset()[f"{m}_mean"].values
        assert np.all(np.isfinite(v)) and np.all(v >= 0)
    assert np.all(s["distance"].to_dataset()["l1_mean"].values <= 2.0 + 1e-9)
    assert table(s, "lens_distance") is not None
    assert np.all(np.isfinite(s["lens_distance"].to_dataset()["l1_mean"].values))
    acc = s["accuracy"].to_dataset().sel({VARIANT: rows[-1]})
    assert int(acc["n_all"]) == n and 0.0 <= float(acc["staa_all"]) <= 1.0
    if has_mode:
        assert int(acc["n"]) >= 1
        for k in ("staa", "revb", "p_value"):
            assert 0.0 <= float(acc[k]) <= 1.0
    else:
        assert int(acc["n"]) == 0
    if has_uniform:
        assert s["bias"].to_dataset().sizes[VARIANT] >= 1
        assert np.all(np.isfinite(s["bias"].to_dataset()["p_first_mean"].values))
        assert np.all(np.isfinite(s["bias"].to_dataset()["stated_a_mean"].values))
    assert "Revealed belief vs truth" in section.text and "StaA" in section.text
    assert {f.name for f in section.files} == {"revealed_accuracy.png", "revealed_lens.png"}
    if name == "dice":  # the section is registered: `analyze` runs it and writes the report
        report = analyze(path, tmp_path / "report")
        assert "Revealed belief vs stated answer" in report.text
        assert (tmp_path / "report" / "revealed_accuracy.png").exists()
        assert "revealed_accuracy.png" in (tmp_path / "report" / "report.md").read_text()


def test_every_outcome_items_pair_on_the_first(smol_model: LoadedModel, tmp_path: Path) -> None:
    """stated=every (the default): one revealed read-out per grid point, a stated question per
    outcome; the analysis pairs RevB with the stated question about the mode."""
    env = envs.get("coins", coins=2, focus="Heads", bias=3, variant="regular")
    assert env.count() == 3  # type: ignore[attr-defined]
    path = write_cache(env, smol_model, tmp_path / "every.h5", ExtractOptions(episodes=3))
    ds = belieflens.open_cache(path)
    try:
        probes = np.asarray(ds["probe"].values).astype(str)
        assert (probes == "revealed").sum() == 1 and (probes == "stated").sum() == 15
        r = readouts(ds, lens=False)
        s = summarise(r)
    finally:
        ds.close()
    assert int(r.revealed.notnull().any("outcome").sum()) == 1
    assert int(s["distance"].to_dataset()["n"].values[0]) == 1
    acc = s["accuracy"].to_dataset()
    assert int(acc["n_all"].values[0]) == 3 and int(acc["n"].values[0]) == 1
