"""Compare two cache files: every dataset bit for bit (NaN equal to NaN), every attribute but
the run's own time, commit and load time. Layout (chunks, filters) is not compared.

Used to check that a change leaves a study's data unchanged, e.g. ``make demo`` before and
after::

    .venv/bin/python -m bench.compare_caches before/coin-flip.h5 runs/demo/coin-flip.h5

Prints ``identical`` or one line per difference (exit 1), then attributes only the second
file has.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import h5py
import numpy as np

SKIP = {"created", "git_commit", "model_load_seconds", "DIMENSION_LIST", "REFERENCE_LIST",
        "CLASS", "NAME", "_Netcdf4Dimid", "_Netcdf4Coordinates", "_NCProperties"}


def _same(u: Any, v: Any) -> bool:
    a, b = np.asarray(u), np.asarray(v)
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
    return a.shape == b.shape and bool(np.array_equal(a, b))


def _attrs(x: Any, y: Any, where: str, bad: list[str], new: list[str]) -> None:
    ka, kb = set(x.attrs) - SKIP, set(y.attrs) - SKIP
    bad.extend(f"{where}: attribute {k} missing in the second file" for k in sorted(ka - kb))
    new.extend(f"{where}: attribute {k} only in the second file" for k in sorted(kb - ka))
    bad.extend(f"{where}: attribute {k} differs" for k in sorted(ka & kb)
               if not _same(x.attrs[k], y.attrs[k]))


def compare(first: str, second: str) -> tuple[list[str], list[str]]:
    """Differences between the two files, and what only the second one has."""
    bad: list[str] = []
    new: list[str] = []
    with h5py.File(first, "r") as a, h5py.File(second, "r") as b:
        _attrs(a, b, "/", bad, new)
        items_a: dict[str, Any] = {}
        items_b: dict[str, Any] = {}
        a.visititems(items_a.__setitem__)
        b.visititems(items_b.__setitem__)
        bad.extend(f"{n}: missing in the second file" for n in sorted(set(items_a) - set(items_b)))
        new.extend(f"{n}: only in the second file" for n in sorted(set(items_b) - set(items_a)))
        for name in sorted(set(items_a) & set(items_b)):
            x, y = items_a[name], items_b[name]
            _attrs(x, y, name, bad, new)
            if isinstance(x, h5py.Dataset) and isinstance(y, h5py.Dataset):
                if x.dtype != y.dtype or x.shape != y.shape:
                    bad.append(f"{name}: {x.dtype}{x.shape} != {y.dtype}{y.shape}")
                elif not _same(x[()], y[()]):
                    bad.append(f"{name}: values differ")
    return bad, new


def main() -> None:
    """Command line: two cache files."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("first")
    p.add_argument("second")
    args = p.parse_args()
    bad, new = compare(args.first, args.second)
    print("\n".join(bad) if bad else "identical")
    for line in new:
        print(f"note: {line}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
