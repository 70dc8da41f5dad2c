"""The belief check's table in an intervention report (a token-level study's steering or
patching result; :mod:`belieflens.analysis.belief_check` defines the numbers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.belief_check import has_check, patch_belief_check, steer_belief_check
from belieflens.dims import ALPHA, LAYER, POSITIONS

HEAD = ("\n\nbelief check: TVD of the edited output to the oracle's next-token distribution for "
        "the belief the regression reads off the edited residual (projected onto the "
        "simplex), vs the unedited output's TVD to it; follow = 1 - edited/unedited")


def belief_check_text(ds: xr.Dataset) -> str:
    """The table of a result that carries the check ('' for one that does not)."""
    if not has_check(ds):
        return ""
    if "belief_read" in ds.variables:
        return HEAD + "\n" + steer_check_table(steer_belief_check(ds)) + lam_text(ds)
    return HEAD + "\n" + patch_check_table(patch_belief_check(ds)) + lam_text(ds)


def lam_text(ds: xr.Dataset) -> str:
    """One line: the belief map's ridge penalty per layer, over its folds ('' for a result
    without ``belief_read_lam``)."""
    if "belief_read_lam" not in ds.variables:
        return ""
    lam = ds["belief_read_lam"]
    cells = []
    for la in lam[LAYER].values:
        v = np.asarray(lam.sel({LAYER: la}).values, dtype=np.float64)
        lo, hi = float(np.nanmin(v)), float(np.nanmax(v))
        cells.append(f"layer {int(la)} {lo:.2g}" + (f" to {hi:.2g}" if hi > lo else ""))
    return ("\nbelief map penalty (standardised features; chosen per fold by cross-validation "
            "over the other folds' episodes): " + ", ".join(cells))


def steer_check_table(check: xr.Dataset) -> str:
    """Per layer and α: edited and unedited TVD, follow, and the random control's follow."""
    return _table(check, ALPHA, "  alpha", lambda a: f" {float(a):>6g}",
                  "  control follow  predicted move",
                  lambda s: f" {_num(s.control_follow):>15} "
                            f"{float(s.tvd_predicted_move_mean):15.4f}")


def patch_check_table(check: xr.Dataset) -> str:
    """Per layer and position set: edited and unedited TVD and follow."""
    return _table(check, POSITIONS, "  positions", lambda p: f"  {p!s:>9}", "", lambda s: "")


def _table(check: xr.Dataset, by: str, by_head: str, by_cell: Callable[[Any], str],
           more_head: str, more: Callable[[xr.Dataset], str]) -> str:
    """One row per layer and value of ``by``: edited and unedited TVD and follow, then the
    ``more`` columns."""
    lines = [f"  layer{by_head}   edited  unedited  follow{more_head}"]
    for la in check[LAYER].values:
        for v in check[by].values:
            s = check.sel({LAYER: la, by: v})
            lines.append(f"  {int(la):>5}{by_cell(v)} {float(s.tvd_edited_mean):8.4f} "
                         f"{float(s.tvd_unedited_mean):9.4f} {_num(s.follow):>7}{more(s)}")
    return "\n".join(lines)


def _num(x: xr.DataArray) -> str:
    v = float(x)
    return f"{v:.3f}" if np.isfinite(v) else "n/a"
