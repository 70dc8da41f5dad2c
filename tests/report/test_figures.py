"""The report's figures: laid out so that no text sits on other text."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from belieflens.report import figures


def _lens_table(deliveries: int, probes: int) -> xr.Dataset:
    rng = np.random.default_rng(0)
    tv = xr.DataArray(rng.uniform(0, 0.6, (deliveries, probes, 31, 11)),
                      dims=("delivery", "probe", "layer", "turn"),
                      coords={"delivery": ["multi-turn", "single-turn"][:deliveries],
                              "probe": ["bias", "next-flip"][:probes],
                              "layer": np.arange(31), "turn": np.arange(11)})
    return xr.Dataset({"tvd_mean": tv})


@pytest.mark.parametrize("deliveries", [1, 2])
def test_lens_heatmap_titles_clear_the_row_above(deliveries: int, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each panel's title sits below the x-axis label and tick labels of the panel above it
    (they overlapped before the figure used constrained layout)."""
    kept: list[Any] = []
    save = figures.save

    def keep(fig: Any, out: Path, **kw: Any) -> Path:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes[:-1]:  # the last axes is the colour bar
            kept.append((ax.title.get_window_extent(renderer),
                         ax.xaxis.label.get_window_extent(renderer),
                         ax.xaxis.get_tightbbox(renderer), ax.get_position().y0))
        return save(fig, out, **kw)

    monkeypatch.setattr(figures, "save", keep)
    out = figures.lens_heatmap(_lens_table(deliveries, 2), tmp_path / "lens_tvd.png")
    assert out.stat().st_size > 10_000
    rows = sorted({round(y0, 3) for *_, y0 in kept}, reverse=True)
    assert len(rows) == deliveries
    for upper, lower in itertools.pairwise(rows):
        above = [k for k in kept if round(k[3], 3) == upper]
        below = [k for k in kept if round(k[3], 3) == lower]
        lowest_of_above = min(min(label.y0, ticks.y0) for _, label, ticks, _ in above)
        assert all(title.y1 < lowest_of_above for title, *_ in below)
