"""The store: the cache file and the study directory, their schema, checksums and records.

- :mod:`.file`: the HDF5 cache file (netCDF-compatible), written crash-safe and opened as an
  ``xarray.Dataset``;
- :mod:`.integrity`: per-chunk checksums and one-line refusals of damaged data;
- :mod:`.manifest`, :mod:`.cache`: a cache file or a sharded study's directory, opened
  lazily, and merging shards;
- :mod:`.fingerprint`: what decides a file's data, to resume or refuse;
- :mod:`.provenance`, :mod:`.info`, :mod:`.verify`, :mod:`.lock`.

Nothing here loads a model.
"""
