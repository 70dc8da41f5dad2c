"""The study page in a real browser (Debian's headless Chromium through Playwright): it loads
with no console error and no request off the disk; an episode, a turn and a layer selected
show the Dataset's beliefs, oracle and divergences to 3 decimals; a heatmap click selects
that layer and turn everywhere; the keyboard moves between episodes and turns; slices beside
the page load when selected. Screenshots of the episode view and the heatmap are kept under
``runs/browser/`` (``BELIEFLENS_SCREENSHOT_PAGE`` points that test at another page, e.g.
``make demo``'s, for the pictures in ``docs/``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import xarray as xr

from belieflens.analysis.results import study_results
from belieflens.report.viewer import study_page
from belieflens.store.cache import open_cache
from tests.report.browser import artifact, open_page

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def reference(viewer_study: Path) -> xr.Dataset:
    """The Dataset the page must show, through the accessor (not the viewer's own path)."""
    ds = open_cache(viewer_study)
    try:
        return xr.Dataset({
            "output": ds.bl.beliefs(),
            "oracle": ds.bl.oracle(),
            "lens": ds.bl.beliefs("logit-lens"),
            **{f"{m}_output": ds.bl.divergence(m) for m in ("tvd", "kl", "js")},
            **{f"{m}_lens": ds.bl.divergence(m, source="logit-lens")
               for m in ("tvd", "kl", "js")},
        }).load()
    finally:
        ds.close()


def _close(text: str, value: float) -> bool:
    """``text`` (the page's 3-decimal number) equals ``value`` to 3 decimals."""
    return abs(float(text) - value) <= 5e-4 + 1e-9


def test_the_page_loads_clean_and_offline(browser: Any, viewer_out: Path) -> None:
    opened = open_page(browser, viewer_out / "study.html")
    try:  # the summary's charts are drawn just after the first screen
        opened.page.wait_for_function("document.getElementById('bias-option').data !== undefined")
        assert opened.errors == []
        assert opened.requests == []
        page = opened.page
        assert page.locator("#note").inner_text() == "all 3 episodes embedded"
        assert page.locator("#tokens .tok.answer").count() == 1
        labels = [page.locator(f"label[for={c}]").count() for c in ("episode", "turn", "layer")]
        assert labels == [1, 1, 1]
    finally:
        opened.page.close()


def test_selected_values_equal_the_datasets(browser: Any, viewer_out: Path,
                                            reference: xr.Dataset) -> None:
    page = open_page(browser, viewer_out / "study.html").page
    try:
        page.select_option("#probe", label="next-flip")
        page.select_option("#episode", label="2")
        page.locator("#tokens").focus()
        for key in ("ArrowRight", "ArrowRight", "ArrowDown"):  # turn 2, one layer down
            page.keyboard.press(key)
        assert page.locator("#turn-value").inner_text() == "2"
        layer = int(page.locator("#layer-value").inner_text())
        assert layer == int(reference["layer"].values[-2])
        at = {"delivery": "multi-turn", "probe": "next-flip", "episode": 2, "turn": 2}
        for metric in ("TVD", "KL", "JS"):
            page.select_option("#metric", label=metric)
            m = metric.lower()
            assert _close(page.locator("#div-output").inner_text(),
                          float(reference[f"{m}_output"].sel(at)))
            assert _close(page.locator("#div-lens").inner_text(),
                          float(reference[f"{m}_lens"].sel(at).sel(layer=layer)))
        rows = page.locator("#belief-table tr[data-outcome]")
        assert rows.count() == 2
        for i in range(rows.count()):
            row = rows.nth(i)
            for col, ref in (("output", reference["output"].sel(at)),
                             ("oracle", reference["oracle"].sel(at)),
                             ("lens", reference["lens"].sel(at).sel(layer=layer))):
                cell = row.locator(f"td[data-col={col}]").inner_text()
                assert _close(cell, float(ref.isel(outcome=i))), (col, i, cell)
    finally:
        page.close()


def _cell_point(page: Any, turn: int, layer: int) -> tuple[float, float]:
    """Page coordinates of the heatmap cell (turn, layer), from plotly's axes."""
    xy = page.evaluate(
        """([t, l]) => { const gd = document.getElementById('heatmap');
        const fl = gd._fullLayout, r = gd.getBoundingClientRect();
        return [r.left + fl.xaxis._offset + fl.xaxis.l2p(t),
                r.top + fl.yaxis._offset + fl.yaxis.l2p(l)]; }""", [turn, layer])
    return float(xy[0]), float(xy[1])


def test_a_heatmap_click_selects_its_layer_and_turn(browser: Any, viewer_out: Path) -> None:
    page = open_page(browser, viewer_out / "study.html").page
    try:
        page.locator("#heatmap").scroll_into_view_if_needed()
        x, y = _cell_point(page, 1, 0)
        page.mouse.click(x, y)
        page.wait_for_function("document.getElementById('turn-value').textContent === '1'")
        assert page.locator("#layer-value").inner_text() == "0"
        assert "turn 1" in page.locator("#belief-table caption").inner_text()
        assert "layer 0" in page.locator("#belief-table caption").inner_text()
        assert "turn 1:" in page.locator("#token-caption").inner_text()
        assert page.evaluate(
            "document.getElementById('trajectory').layout.shapes[0].x0") == 1
    finally:
        page.close()


def test_the_keyboard_moves_between_episodes_and_turns(browser: Any, viewer_out: Path) -> None:
    page = open_page(browser, viewer_out / "study.html").page
    try:
        page.locator("#tokens").focus()
        page.keyboard.press("n")
        assert page.locator("#episode").input_value() == "1"
        page.keyboard.press("PageDown")
        page.keyboard.press("PageDown")  # past the last episode: stays there
        assert page.locator("#episode").input_value() == "2"
        page.keyboard.press("p")
        assert page.locator("#episode").input_value() == "1"
        page.keyboard.press("ArrowRight")
        assert page.locator("#turn-value").inner_text() == "1"
        assert "episode 1," in page.locator("#token-caption").inner_text()
    finally:
        page.close()


def test_slices_beside_the_page_load_when_selected(browser: Any, viewer_study: Path,
                                                   tmp_path: Path) -> None:
    ds = open_cache(viewer_study)
    try:
        results = study_results(ds, decoders=False, episodes=True)
    finally:
        ds.close()
    page_path = study_page(results, {}, "", tmp_path / "study.html", budget=1000).path
    opened = open_page(browser, page_path)
    page = opened.page
    try:
        assert "written beside the page in study_files/" in page.locator("#note").inner_text()
        page.select_option("#episode", label="2")
        page.wait_for_function(
            "document.querySelector('#belief-table caption').textContent.includes('episode 2')")
        assert opened.errors == [] and opened.requests == []
    finally:
        page.close()


def test_screenshots_of_the_episode_view_and_the_heatmap(browser: Any, viewer_out: Path) -> None:
    html = Path(os.environ.get("BELIEFLENS_SCREENSHOT_PAGE", viewer_out / "study.html"))
    page = open_page(browser, html).page
    try:
        page.locator("#tokens").focus()
        for key in ("ArrowRight", "ArrowRight", "ArrowRight"):
            page.keyboard.press(key)
        episode = page.locator("main .grid").nth(0)
        heat = page.locator("#heatmap").locator("xpath=..")
        for shot, loc in (("viewer-episode.png", episode), ("viewer-heatmap.png", heat)):
            out = artifact(shot)
            loc.screenshot(path=str(out))
            assert out.stat().st_size > 10_000
    finally:
        page.close()


OVERLAPS = """(id) => {
  const chart = document.getElementById(id);
  const box = (sel) => {
    const e = chart.querySelector(sel);
    return e && e.getBoundingClientRect();
  };
  const meet = (a, b) => !!(a && b && a.width && b.width && a.left < b.right && b.left < a.right
                             && a.top < b.bottom && b.top < a.bottom);
  const bar = box(".modebar"), title = box(".gtitle"), legend = box(".legend"), xt = box(".xtitle");
  return { toolbar: !!(bar && bar.width), title: !!title,
           toolbar_on_title: meet(bar, title), legend_on_axis_title: meet(legend, xt) };
}"""


def test_the_toolbar_and_legends_leave_chart_titles_readable(browser: Any,
                                                             viewer_out: Path) -> None:
    """With the pointer over a chart Plotly shows its toolbar in the top right corner: it must
    not cover the chart's title, and a legend must not sit on the x-axis title."""
    page = open_page(browser, viewer_out / "study.html").page
    try:
        for chart in ("beliefs", "heatmap", "trajectory"):
            page.locator(f"#{chart}").hover()
            page.wait_for_timeout(300)
            found = page.evaluate(OVERLAPS, chart)
            assert found["toolbar"] and found["title"], (chart, found)
            assert not found["toolbar_on_title"], (chart, found)
            assert not found["legend_on_axis_title"], (chart, found)
    finally:
        page.close()


@pytest.fixture(scope="module")
def compare_page_path(viewer_study: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``compare --out`` of the tiny study and a copy that claims other weights."""
    import shutil

    import h5py

    from belieflens.report.compare import compare_report

    tmp = tmp_path_factory.mktemp("compare")
    other = tmp / "other.h5"
    shutil.copy(viewer_study, other)
    with h5py.File(other, "r+") as h:
        h.attrs["weights_hash"] = "0" * 64
        h.attrs["model_spec"] = "other-model"
    compare_report([viewer_study, other], tmp / "out", decoders=False)
    return tmp / "out" / "compare.html"


def test_the_compare_page_shows_every_model_by_depth(browser: Any,
                                                     compare_page_path: Path) -> None:
    opened = open_page(browser, compare_page_path)
    page = opened.page
    try:
        assert opened.errors == [] and opened.requests == []
        assert page.evaluate("document.getElementById('depth').data.length") == 2
        assert page.evaluate(
            "document.getElementById('depth').layout.xaxis.title.text").startswith(
            "relative depth")
        page.keyboard.press("ArrowRight")
        assert page.locator("#turn-value").inner_text() == "1"
        assert "turn 1" in page.evaluate("document.getElementById('depth').layout.title.text")
    finally:
        page.close()
