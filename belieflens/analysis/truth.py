"""Episode truth read back from a cache file: one value per episode.

:func:`belieflens.run.extract.write_rows` stores each episode's ``truth`` mapping
as ``truth_<key>`` variables on the ``query`` dimension (every read-out of an
episode repeats its episode's values). These helpers collapse them to the
``episode`` dimension that :func:`belieflens.analysis.beliefs.output_beliefs` uses.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belieflens.dims import EPISODE
from belieflens.errors import CacheFileError

TRUTH_PREFIX = "truth_"
"""Prefix of episode-truth variables (the same as ``belieflens.run.extract.TRUTH_PREFIX``;
kept here so that analysis does not import the extraction stage)."""


def has_truth(ds: xr.Dataset, key: str) -> bool:
    """Whether the cache file stores episode truth ``key``."""
    return f"{TRUTH_PREFIX}{key}" in ds.variables


def episode_truth(ds: xr.Dataset, key: str) -> xr.DataArray:
    """Episode truth ``key`` on the ``episode`` dimension (sorted episode indices).

    Text values come back as ``str``, numbers as ``float64``. Raises
    :class:`~belieflens.errors.CacheFileError` when the file lacks the key.
    """
    name = f"{TRUTH_PREFIX}{key}"
    if name not in ds.variables:
        raise CacheFileError(f"cache file lacks episode truth {key!r} (variable {name!r})")
    episode = np.asarray(ds[EPISODE].values).astype(np.int64)
    values = np.asarray(ds[name].values)
    uniq, first = np.unique(episode, return_index=True)
    picked = values[first]
    data = picked.astype(str) if picked.dtype.kind in "OUS" else picked.astype(np.float64)
    return xr.DataArray(data, dims=[EPISODE], coords={EPISODE: uniq.tolist()}, name=key)
