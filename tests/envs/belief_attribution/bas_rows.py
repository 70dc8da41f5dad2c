"""One domain's row of the BAS table (an ``xarray.Dataset`` over ``domain``) as plain numbers,
for assertions."""

from __future__ import annotations

import xarray as xr

from belieflens.envs.belief_attribution.metrics import DOMAIN, BASResult


def bas_row(table: xr.Dataset, name: str) -> BASResult | None:
    """Row ``name`` of ``table``; ``None`` where the domain lacks one of the conditions."""
    r = table.sel({DOMAIN: name})
    if not bool(r["defined"]):
        return None
    return BASResult(
        bas=float(r["bas"]), low=float(r["low"]), high=float(r["high"]),
        rate_user=float(r["rate_user"]), rate_self=float(r["rate_self"]),
        n_user=int(r["n_user"]), n_self=int(r["n_self"]), level=float(table.attrs["level"]),
        questions=int(r["questions"]),
    )
