"""``belieflens info``: provenance, dimensions and sizes of a cache file."""

from __future__ import annotations

from pathlib import Path

from belieflens.cache.store import open_cache


def describe(path: str | Path) -> str:
    """A human-readable summary of a cache file (raises CacheFileError if unreadable)."""
    p = Path(path)
    ds = open_cache(p)
    try:
        lines = [f"file: {p} ({p.stat().st_size / 1e6:.1f} MB)", "provenance:"]
        for k in sorted(ds.attrs):
            lines.append(f"  {k}: {ds.attrs[k]}")
        lines.append("dimensions: " + ", ".join(f"{k}={v}" for k, v in ds.sizes.items()))
        lines.append("variables:")
        for name, var in {**ds.data_vars, **ds.coords}.items():
            size = var.size * var.dtype.itemsize
            lines.append(f"  {name} ({', '.join(map(str, var.dims))}) {var.dtype} "
                         f"{size / 1e6:.2f} MB")
        probes = sorted({str(x) for x in ds["probe"].values})
        deliveries = sorted({str(x) for x in ds["delivery"].values})
        lines.append(f"probes: {', '.join(probes)}; deliveries: {', '.join(deliveries)}; "
                     f"episodes: {len(set(ds['episode'].values.tolist()))}")
        return "\n".join(lines)
    finally:
        ds.close()
