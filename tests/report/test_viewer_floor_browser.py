"""The study page of a study analysed with floors, in Debian's headless Chromium: each floored
read-out per layer beside its untrained band and best statistic baseline, the numbers at the
selected layer equal to the floor Dataset's, and a read-out whose test has not shown power on
a known pair of the study's kind marked "no shown power" (in the chart's title, its select and
the heatmap's title); and the compare page of a model beside its untrained networks, its band
drawn and each read-out marked. The screenshot is kept as ``runs/browser/viewer-floor.png``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from belieflens.analysis.power_record import Marks
from belieflens.analysis.results import study_results
from belieflens.report.viewer import study_page
from belieflens.store.cache import open_cache
from tests.report.browser import artifact, open_page

pytestmark = pytest.mark.browser


def _floors(n_layers: int) -> xr.Dataset:
    """A floor Dataset of the shape :func:`belieflens.analysis.floor.floor` returns, for the
    logit lens and the decoder (numbers made up: the page's drawing is what is tested)."""
    rng = np.random.default_rng(0)
    layer = np.arange(n_layers)
    controls = 0.30 + 0.02 * rng.standard_normal((2, 3, n_layers))
    trained = np.stack([np.linspace(0.35, 0.05, n_layers), np.full(n_layers, 0.31)])
    sel = controls.mean(axis=1) - trained
    return xr.Dataset(
        {"trained": (("source", "layer"), trained),
         "control_value": (("source", "control", "layer"), controls),
         "floor_mean": (("source", "layer"), controls.mean(axis=1)),
         "floor_min": (("source", "layer"), controls.min(axis=1)),
         "floor_max": (("source", "layer"), controls.max(axis=1)),
         "selectivity": (("source", "layer"), sel),
         "selectivity_low": (("source", "layer"), sel - 0.05),
         "selectivity_high": (("source", "layer"), sel + 0.05),
         "exceeds": (("source", "layer"), sel - 0.05 > 1e-6),
         "metric": ("source", ["tvd", "tvd"]),
         "baseline_best": ("source", ["", "counts"]),
         "baseline_value": (("source", "baseline"), [[np.nan], [0.2]])},
        coords={"source": ["logit-lens", "decoder"], "layer": layer,
                "control": [f"untrained seed {i}" for i in range(3)], "baseline": ["counts"]},
        attrs={"level": 0.95})


@pytest.fixture(scope="module")
def floored_page(viewer_study: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[Path, xr.Dataset]:
    with open_cache(viewer_study) as ds:
        results = study_results(ds, decoders=False, episodes=True)
        n_layers = ds.sizes["layer"]
    floors = _floors(n_layers)
    marks = Marks(("coin-flip", "language model"), {"logit-lens": ("a",), "decoder": ("a",)},
                  {"logit-lens": ("a",)})
    path = tmp_path_factory.mktemp("floored") / "study.html"
    study_page(results, {}, "headline", path, floors=floors, marks=marks)
    return path, floors


def test_each_read_out_stands_beside_its_floor_and_its_marks(browser: Any,
                                                            floored_page: tuple[Path, Any]
                                                            ) -> None:
    path, floors = floored_page
    opened = open_page(browser, path)
    page = opened.page
    try:
        assert opened.errors == [] and opened.requests == []
        title = page.evaluate("document.getElementById('floor').layout.title.text")
        assert title.startswith("logit-lens: TVD")  # the logit lens has shown power
        names = page.evaluate("document.getElementById('floor').data.map(t => t.name)")
        assert "untrained band (3 seeds)" in names and "this network" in names
        page.select_option("#floor-source", index=1)
        title = page.evaluate("document.getElementById('floor').layout.title.text")
        assert title.startswith("decoder (no shown power): TVD")
        names = page.evaluate("document.getElementById('floor').data.map(t => t.name)")
        assert "best statistic baseline (counts)" in names
        assert "no shown power: not separated on a" in page.locator("#floor-note").inner_text()
        layer = int(page.locator("#layer-value").inner_text())
        cell = page.locator("#floor-table tr", has_text="this network").locator("td")
        want = float(floors["trained"].sel(source="decoder", layer=layer))
        assert abs(float(cell.inner_text()) - want) <= 5e-4
        page.locator("#floor").locator("xpath=..").screenshot(path=str(artifact(
            "viewer-floor.png")))
        assert artifact("viewer-floor.png").stat().st_size > 10_000
    finally:
        page.close()


@pytest.fixture(scope="module")
def floored_compare(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``compare --out`` of a tiny-model study beside two untrained networks of its shape (8
    episodes: the bootstrap's 1000 replicates need 7), with an empty power record."""
    import belieflens
    from belieflens.report.compare import compare_report

    d = tmp_path_factory.mktemp("floored-compare")
    files = [belieflens.extract("coin-flip", params={"turns": 2, "delivery": "multi-turn"},
                                model=str(tiny_dir), out=d / f"{n}.h5", episodes=8, seed=0,
                                init=init, threads=1, kernels="default")
             for n, init in (("t", None), ("r0", "random:0"), ("r1", "random:1"))]
    with pytest.MonkeyPatch.context() as mp:  # a record with no known pair
        mp.setenv("BELIEFLENS_POWER_RECORD", str(d / "no-record.json"))
        compare_report(files, d / "out", decoders=False)
    return d / "out" / "compare.html"


def test_the_compare_page_sets_each_model_beside_its_untrained_band(
        browser: Any, floored_compare: Path) -> None:
    opened = open_page(browser, floored_compare)
    page = opened.page
    try:
        assert opened.errors == [] and opened.requests == []
        names = page.evaluate("document.getElementById('floors').data.map(t => t.name)")
        bands = [n for n in names if n and n.endswith(": untrained band")]
        assert len(bands) == 1, names  # the trained model only: the controls are its band
        # no known pair of the study's kind in the record: every read-out is marked
        lines = [x for x in names if x and not x.endswith(("untrained band", "its floor"))]
        assert lines and all(x.endswith(" (no shown power)") for x in lines), names
        notes = page.locator("#floor-notes li").all_inner_texts()
        assert notes and all("no shown power" in n for n in notes)
    finally:
        page.close()
