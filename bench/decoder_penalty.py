"""Does the softmax decoder's floor verdict depend on its fixed penalty?

``analyze --floor`` reports, per layer, the held-out TVD to the oracle of a softmax decoder
(:func:`~belieflens.analysis.summary.decoder_tvd`) fitted with a fixed L2 penalty on
standardised features (:data:`~belieflens.analysis.summary.DECODER_LAM`), for the study and
for each untrained control, and the selectivity (floor mean − trained, positive = better)
with a bootstrap interval over episodes. This script refits the decoders of the study and of
every control at each penalty of ``--lams`` with the same seed and folds as ``analyze``, and
averages and bootstraps them with the floor's own functions
(:func:`~belieflens.analysis.floor.readouts`,
:func:`~belieflens.analysis.floor.compare_readouts`), so that at ``DECODER_LAM`` the numbers
are ``analyze --floor``'s: the script checks that against
:func:`~belieflens.analysis.floor.floor` itself (``--no-check`` skips it, which saves one
more round of fits).

It prints, per penalty and layer, the trained TVD, the floor mean, the selectivity with its
95% interval (``*``: the interval excludes 0, beyond the floor); then per penalty the best
layer, its selectivity and how many layers are beyond the floor.
A layer whose trained value equals every control's (layer 0 of a language model: its
residual at the read position is the same token's embedding in every query) is left out of
the best layer. Last line: ``max_selectivity_change=... at_lam=... at_layer=...
max_relative_change=... beyond_floor_changes=yes|no best_layers=LAM:LAYER,...
best_selectivity_any_lam=...``: the largest absolute change of any layer's selectivity from
its value at the reference penalty (``DECODER_LAM``), that change over the reference's
largest absolute selectivity, whether the set of layers beyond the floor differs at any
penalty, each penalty's best layer, and the highest selectivity of any layer at any
penalty.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python -m bench.decoder_penalty STUDY.h5 --floor
CONTROL0.h5 --floor CONTROL1.h5 [...] [--lams 1e-3 1e-2 1e-1 1] [--seed 0] [--no-check]``;
the files are those of ``make floor-models`` (``runs/floors/models/MODEL-trained.h5`` and
``MODEL-random{0,1,2}.h5``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr
from numpy.typing import NDArray

import belieflens
from belieflens.analysis.beliefs import lens_beliefs
from belieflens.analysis.floor import (
    SOURCE,
    TOLERANCE,
    Readout,
    check_floors,
    compare_readouts,
    floor,
    readouts,
)
from belieflens.analysis.summary import DECODER_FOLDS, DECODER_LAM, decoder_tvd
from belieflens.dims import LAYER
from belieflens.errors import BeliefLensError
from belieflens.types import DebiasMethod

METHOD: DebiasMethod = "geometric"
"""How rotations are pooled: ``analyze``'s default."""

VARS = ("trained", "control_value", "floor_mean", "selectivity", "selectivity_low",
        "selectivity_high", "exceeds")
"""The decoder's floor variables compared with ``floor``'s in the check."""


def decoder_readout(ds: xr.Dataset, lam: float, seed: int, logit: xr.DataArray) -> Readout:
    """The decoder's floor read-out of one file at penalty ``lam``: ``decoder_tvd`` seeded
    and folded as ``analyze`` does it, averaged by :func:`readouts` (``logit``: the file's
    lens beliefs, which mask the instances without an oracle)."""
    rows = decoder_tvd(ds, np.random.default_rng(seed), n_folds=DECODER_FOLDS, lam=lam)
    out = readouts(ds, method=METHOD, decoders=True, seed=seed, decoder_rows=rows,
                   logit=logit)
    return next(r for r in out if r.source == "decoder")


def decoder_floor(files: Sequence[xr.Dataset], logits: Sequence[xr.DataArray], lam: float,
                  seed: int) -> xr.Dataset:
    """The decoder's floor Dataset (dim ``layer``) at ``lam``: ``files[0]`` the study, the
    rest its controls."""
    rs = [decoder_readout(ds, lam, seed, lg) for ds, lg in zip(files, logits, strict=True)]
    f = compare_readouts([rs[0]], [[r] for r in rs[1:]], n_layers=files[0].sizes[LAYER],
                         control_labels=[f"control {i}" for i in range(len(rs) - 1)],
                         seed=seed)
    return f.sel({SOURCE: "decoder"})


def check_reference(study: xr.Dataset, controls: Sequence[Path], seed: int,
                    mine: xr.Dataset) -> None:
    """Assert that ``mine`` (the decoder's floor at ``DECODER_LAM``) equals
    :func:`floor`'s, which is what ``analyze --floor`` prints."""
    ref = floor(study, list(controls), method=METHOD, decoders=True, seed=seed)
    ref = ref.sel({SOURCE: "decoder"})
    for v in VARS:
        a, b = np.asarray(mine[v].values), np.asarray(ref[v].values)
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), v


def _fmt_span(layers: Sequence[int]) -> str:
    return ",".join(str(x) for x in layers) if layers else "none"


def table(f: xr.Dataset, lam: float) -> list[str]:
    """One penalty's rows: per layer trained, floor mean, selectivity [interval]."""
    lines = [f"lam={lam:g}", "layer   trained  floor_mean  selectivity [95% interval]"]
    for la in f[LAYER].values:
        s = f.sel({LAYER: la})
        lo = float(s.selectivity_low)
        mark = " *" if lo > TOLERANCE else ""
        lines.append(f"{int(la):>5} {float(s.trained):9.4f} {float(s.floor_mean):11.4f} "
                     f"{float(s.selectivity):+12.4f} [{lo:+.4f}, "
                     f"{float(s.selectivity_high):+.4f}]{mark}")
    return lines


def informative(f: xr.Dataset) -> NDArray[np.bool_]:
    """The layers whose read-out differs from some control's beyond rounding: a layer where
    the trained value equals every control's (layer 0 of a language model, whose residual at
    the read position is the same token's embedding in every query) reads nothing of the
    weights and is left out of the best layer."""
    gap = np.abs(np.asarray(f["control_value"].values) - np.asarray(f["trained"].values))
    return np.asarray((gap > TOLERANCE).any(axis=0))


def best(f: xr.Dataset) -> tuple[int, list[int]]:
    """The informative layer of the largest selectivity (-1: none) and the layers beyond
    the floor."""
    sel = np.where(informative(f), np.asarray(f["selectivity"].values, dtype=np.float64),
                   np.nan)
    top = int(np.nanargmax(sel)) if np.isfinite(sel).any() else -1
    return top, [int(x) for x in np.flatnonzero(np.asarray(f["exceeds"].values))]


def summary_line(floors: dict[float, xr.Dataset], ref: float) -> str:
    """The last line (module docstring)."""
    base = np.asarray(floors[ref]["selectivity"].values, dtype=np.float64)
    change, at_lam, at_layer = 0.0, ref, -1
    for lam, f in floors.items():
        d = np.abs(np.asarray(f["selectivity"].values, dtype=np.float64) - base)
        if np.isfinite(d).any() and float(np.nanmax(d)) > change:
            change, at_lam, at_layer = float(np.nanmax(d)), lam, int(np.nanargmax(d))
    scale = float(np.nanmax(np.abs(base))) if np.isfinite(base).any() else float("nan")
    bests = {lam: best(f) for lam, f in floors.items()}
    changes = any(b != bests[ref][1] for _, b in bests.values())
    tops = ",".join(f"{lam:g}:{top}" for lam, (top, _) in bests.items())
    highest = max((float(floors[lam].selectivity.isel({LAYER: top}))
                   for lam, (top, _) in bests.items() if top >= 0), default=float("nan"))
    return (f"max_selectivity_change={change:.4f} at_lam={at_lam:g} at_layer={at_layer} "
            f"max_relative_change={change / scale:.3f} "
            f"beyond_floor_changes={'yes' if changes else 'no'} best_layers={tops} "
            f"best_selectivity_any_lam={highest:+.4f}")


def run(study: Path, controls: Sequence[Path], lams: Sequence[float], seed: int,
        check: bool) -> None:
    """Fit, print the tables, the per-penalty verdicts and the last line."""
    files = [belieflens.open_cache(p) for p in (study, *controls)]
    try:
        logits = [lens_beliefs(ds, method=METHOD) for ds in files]
        floors: dict[float, xr.Dataset] = {}
        for lam in lams:
            t0 = time.perf_counter()
            floors[lam] = decoder_floor(files, logits, lam, seed)
            print(f"lam={lam:g}: {len(files)} files' decoders in "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
        if check and DECODER_LAM in floors:
            check_reference(files[0], controls, seed, floors[DECODER_LAM])
            print(f"check: lam={DECODER_LAM:g} equals analyze --floor's decoder (floor())",
                  flush=True)
        print()
        for lam, f in floors.items():
            print("\n".join(table(f, lam)), end="\n\n")
        n = files[0].sizes[LAYER]
        left = np.flatnonzero(~informative(floors[lams[0]]))
        if left.size:
            print(f"left out of the best layer: {_fmt_span([int(x) for x in left])} (trained "
                  "equals every control: the read-out does not depend on the weights)")
        for lam, f in floors.items():
            top, beyond = best(f)
            if top < 0:
                print(f"lam={lam:g}: no informative layer")
                continue
            s = f.sel({LAYER: top})
            print(f"lam={lam:g}: best layer {top}, selectivity {float(s.selectivity):+.4f} "
                  f"[{float(s.selectivity_low):+.4f}, {float(s.selectivity_high):+.4f}]; "
                  f"beyond the floor at {len(beyond)} of {n} layers ({_fmt_span(beyond)})")
        ref = DECODER_LAM if DECODER_LAM in floors else lams[0]
        print(f"reference lam={ref:g}")
        print(summary_line(floors, ref))
    finally:
        for ds in files:
            ds.close()


def main() -> None:
    """Parse the options, check the files are one study, and run."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("study", type=Path, help="the trained model's study file")
    ap.add_argument("--floor", dest="floors", type=Path, action="append", default=[],
                    help="an untrained control of the same study (repeat), as analyze's")
    ap.add_argument("--lams", type=float, nargs="+", default=[1e-3, DECODER_LAM, 1e-1, 1.0],
                    help="the decoder penalties (the reference is analyze's, "
                         f"{DECODER_LAM:g})")
    ap.add_argument("--seed", type=int, default=0, help="folds and bootstrap, as analyze's")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the check against analyze --floor's numbers")
    args = ap.parse_args()
    if not args.floors:
        ap.error("needs at least one --floor control file")
    if any(not (lam > 0) for lam in args.lams):
        ap.error("--lams wants positive penalties")
    if not args.study.exists():
        ap.error(f"no such file: {args.study}")
    try:
        with belieflens.open_cache(args.study) as ds:
            check_floors(ds.attrs, args.floors)
    except BeliefLensError as e:
        ap.error(str(e))
    run(args.study, args.floors, list(dict.fromkeys(args.lams)), args.seed,
        not args.no_check)


if __name__ == "__main__":
    main()
