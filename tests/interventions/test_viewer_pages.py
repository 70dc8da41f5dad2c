"""The pages of intervention result files (tiny random model): ``analyze RESULT --out`` writes
``intervention.html``, whose patch heatmap lists the pairs behind a clicked cell and whose
steering slopes show the curves of a clicked layer; each loads in Chromium with no error."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from belieflens.analysis.interventions import patch_beliefs, patch_transfer
from belieflens.cli.intervene import app
from belieflens.cli.main import app as main_app
from tests.report.browser import open_page
from tests.report.test_viewer import decode, payload

runner = CliRunner()


@pytest.fixture(scope="module")
def pages(tiny_model: Any, tiny_study: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> dict[str, Path]:
    """Patch, steer and erase files of the tiny study, each analysed with ``--out``."""
    mod = importlib.import_module("belieflens.interventions.run")
    mp = pytest.MonkeyPatch()
    mp.setattr(mod, "model_for", lambda model, study, **kw: tiny_model)
    tmp = tmp_path_factory.mktemp("intervention-pages")
    args = {"patch": ["--turn", "2", "--layers", "0,2"],
            # steering cross-fits by episode: turn 2 alone leaves a fold one oracle value
            "steer": ["--layers", "1,2", "--alphas=-2,0,2", "--folds", "2"],
            "erase": ["--layers", "2", "--folds", "2"]}
    out: dict[str, Path] = {}
    try:
        for kind, extra in args.items():
            f = tmp / f"{kind}.h5"
            r = runner.invoke(app, [kind, str(tiny_study), "--out", str(f), "--quiet", *extra])
            assert r.exit_code == 0, r.output
            r = runner.invoke(main_app, ["analyze", str(f), "--out", str(tmp / kind)])
            assert r.exit_code == 0, r.output
            out[kind] = tmp / kind / "intervention.html"
            out[f"{kind}.h5"] = f
    finally:
        mp.undo()
    return out


def test_the_patch_page_holds_each_pairs_beliefs(pages: dict[str, Path]) -> None:
    data = payload(pages["patch"])
    assert data["kind"] == "patch"
    with xr.open_dataset(pages["patch.h5"], engine="h5netcdf") as ds:
        beliefs = patch_beliefs(ds.load())
        per_pair = patch_transfer(ds, beliefs=beliefs)
    np.testing.assert_allclose(decode(data["pairs"]["transfer"]),
                               per_pair["transfer"].values, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(decode(data["pairs"]["patched"]),
                               beliefs["patched"].values, rtol=1e-6, atol=1e-7)


def test_patch_transfer_is_unchanged_by_its_split(pages: dict[str, Path]) -> None:
    with xr.open_dataset(pages["patch.h5"], engine="h5netcdf") as ds:
        once = patch_transfer(ds.load())
        split = patch_transfer(ds, beliefs=patch_beliefs(ds))
    xr.testing.assert_identical(once, split)


@pytest.mark.browser
def test_intervention_pages_load_and_link(browser: Any, pages: dict[str, Path]) -> None:
    for kind in ("patch", "steer", "erase"):
        opened = open_page(browser, pages[kind])
        page = opened.page
        try:
            assert opened.errors == [] and opened.requests == [], kind
            if kind == "patch":
                xy = page.evaluate("""() => { const gd = document.getElementById('heatmap');
                    const fl = gd._fullLayout, r = gd.getBoundingClientRect();
                    return [r.left + fl.xaxis._offset + fl.xaxis.l2p(0),
                            r.top + fl.yaxis._offset + fl.yaxis.l2p(2)]; }""")
                page.mouse.click(xy[0], xy[1])
                caption = page.locator("#pair-table caption").inner_text()
                assert caption.startswith("layer 2, positions ")
                assert page.locator("#pair-table tr[data-pair]").count() > 0
            if kind == "steer":
                page.locator("#slopes").focus()
                page.keyboard.press("ArrowRight")
                assert page.evaluate(
                    "document.getElementById('curves').layout.title.text") == "layer 2"
        finally:
            page.close()


def test_steering_on_some_layers_is_labelled_with_those_layers(pages: dict[str, Path]) -> None:
    # steer_summary once labelled layers 1, 2 as 0, 1 (its layer dim had no coordinate)
    data = payload(pages["steer"])
    assert data["coords"]["layer"] == [1, 2]
    assert decode(data["curves"]["estimate_mean"]).shape[2:] == (2, 3)  # layer, alpha
