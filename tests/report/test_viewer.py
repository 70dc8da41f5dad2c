"""The viewer page without a browser: what ``analyze --out`` writes, what the page embeds,
lazily loaded slices, ``--no-html``, bad input, and the token-text table."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from belieflens.analysis.episodes import VIEW_METRICS, episode_views
from belieflens.analysis.results import study_results
from belieflens.cli.main import app
from belieflens.report.viewer import encode, slices
from belieflens.store.cache import open_cache

runner = CliRunner()


def payload(html: Path) -> dict[str, Any]:
    """The JSON a page embeds (``#bl-data``)."""
    text = html.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="bl-data">(.*?)</script>', text, re.S)
    assert m is not None
    data: dict[str, Any] = json.loads(m.group(1))
    return data


def decode(o: dict[str, Any]) -> np.ndarray:
    """An array :func:`belieflens.report.viewer.encode` wrote."""
    raw = base64.b64decode(o["b64"])
    return np.frombuffer(raw, dtype="<i4" if o["dtype"] == "i4" else "<f4").reshape(o["shape"])


@pytest.fixture(scope="module")
def episodes(viewer_study: Path) -> xr.Dataset:
    ds = open_cache(viewer_study)
    try:
        return study_results(ds, decoders=False, episodes=True)["episodes"].to_dataset()
    finally:
        ds.close()


def test_analyze_writes_one_self_contained_page(viewer_out: Path) -> None:
    html = viewer_out / "study.html"
    text = html.read_text(encoding="utf-8")
    # every script and style inline (the browser tests check no request leaves the disk)
    assert not re.search(r'<script[^>]+src=|<link[^>]+href=', text)
    data = payload(html)
    assert data["kind"] == "study" and data["slices"]["files"] == {}
    assert set(data["slices"]["embedded"]) == {"0", "1", "2"}
    assert data["note"] == "all 3 episodes embedded"
    assert data["coords"]["metric"] == list(VIEW_METRICS)
    assert data["coords"]["source"] == ["logit-lens"]
    assert not (viewer_out / "study_files").exists()


def test_the_page_embeds_the_datasets_values(viewer_out: Path, episodes: xr.Dataset) -> None:
    data = payload(viewer_out / "study.html")
    one = data["slices"]["embedded"]["1"]
    want = episodes["lens_divergence"].sel(episode=1).transpose(
        "metric", "source", "delivery", "probe", "turn", "layer").values
    np.testing.assert_allclose(decode(one["lens_divergence"]), want, rtol=1e-6, atol=1e-7)
    mean = episodes["lens_divergence_mean"].transpose(
        "metric", "source", "delivery", "probe", "turn", "layer").values
    np.testing.assert_allclose(decode(data["means"]["lens_divergence"]), mean, rtol=1e-6,
                               atol=1e-7)


def test_episode_views_agree_with_the_accessor(viewer_study: Path, episodes: xr.Dataset) -> None:
    ds = open_cache(viewer_study)
    try:
        for metric in VIEW_METRICS:
            ref = ds.bl.divergence(metric, source="logit-lens")
            got = episodes["lens_divergence"].sel(metric=metric, source="logit-lens")
            xr.testing.assert_allclose(got.drop_vars(["metric", "source"]),
                                       ref.transpose(*got.dims).drop_attrs())
            out = ds.bl.divergence(metric)
            xr.testing.assert_allclose(
                episodes["output_divergence"].sel(metric=metric, drop=True),
                out.transpose(*episodes["output_divergence"].dims[1:]).drop_attrs())
    finally:
        ds.close()


def test_tokens_are_the_files_ids_and_the_text_is_recorded(viewer_study: Path,
                                                           episodes: xr.Dataset) -> None:
    ds = open_cache(viewer_study)
    try:
        ids = np.asarray(ds["input_ids"].values)
        used = np.unique(ids[ids >= 0])
        assert np.isin(used, ds["token_text_id"].values).all()
        assert ds["token_text"].sizes["text_token"] == ds["token_text_id"].sizes["text_token"]
        row = int(np.flatnonzero((ds["episode"].values == 2) & (ds["turn"].values == 1)
                                 & (ds["rotation"].values == 0))[0])
        d, p = str(ds["delivery"].values[row]), str(ds["probe"].values[row])
        shown = episodes["input_ids"].sel(delivery=d, probe=p, episode=2, turn=1).values
        np.testing.assert_array_equal(shown, ids[row])
        assert int(episodes["answer_pos"].sel(delivery=d, probe=p, episode=2, turn=1)) == int(
            ds["answer_pos"].values[row])
    finally:
        ds.close()
    text = dict(zip(episodes["token_text_id"].values.tolist(),
                    episodes["token_text"].values.tolist(), strict=True))
    assert any("<|im_start|>" in t for t in text.values())


def test_large_studies_get_their_slices_beside_the_page(episodes: xr.Dataset,
                                                        tmp_path: Path) -> None:
    page = tmp_path / "study.html"
    entry, files, note = slices(episodes, page, budget=1000)
    assert [f.name for f in files] == ["episode-0.js", "episode-1.js", "episode-2.js"]
    assert set(entry["files"]) == {"0", "1", "2"} and set(entry["embedded"]) == {"0"}
    assert "written beside the page in study_files/" in note
    js = files[2].read_text()
    assert js.startswith("blSlice(2,{") and js.rstrip().endswith(");")


def test_no_html_skips_the_page_and_bad_input_is_one_line(viewer_study: Path,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "rep"
    r = runner.invoke(app, ["analyze", str(viewer_study), "--out", str(out), "--no-decoders",
                            "--no-html"])
    assert r.exit_code == 0, r.output
    assert (out / "report.md").exists() and not (out / "study.html").exists()
    bad = tmp_path / "notes.txt"
    bad.write_text("not a study\n")
    r = runner.invoke(app, ["analyze", str(bad), "--out", str(tmp_path / "bad")])
    assert r.exit_code == 2
    assert len(r.output.strip().splitlines()) == 1 and r.output.startswith("error: ")


def test_encode_keeps_nan_and_integers() -> None:
    x = np.array([[0.5, np.nan], [1.0, 0.0]])
    assert np.isnan(decode(encode(x))[0, 1])
    assert decode(encode(np.array([3, -1]))).tolist() == [3, -1]


def test_episode_views_refuses_an_unknown_metric(episodes: xr.Dataset) -> None:
    beliefs = episodes[["belief", "oracle", "outcome_label"]]
    lens = episodes["lens_belief"].sel(source="logit-lens", drop=True)
    with pytest.raises(ValueError, match="chebyshev"):
        episode_views(beliefs, {"logit-lens": lens}, metrics=("chebyshev",))
