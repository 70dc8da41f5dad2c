"""The shipped internal tests of :mod:`belieflens.analysis.power`, each a per-layer statistic
of one network's files as per-episode terms:

- ``logit-lens`` and ``decoder``: the TVD to the oracle of each layer's logit-lens belief and
  of the held-out linear decoder, mean over the read-outs (deliveries, questions, turns) of
  each episode (the floors' read-outs: :func:`belieflens.analysis.floor.readouts`);
- ``geometry: NAME``: the held-out R² of each belief-geometry target the study's environment
  defines (:func:`geometry_tests`);
- ``patch``, ``steer`` and ``interchange``: how far the output follows the oracle
  (:mod:`belieflens.analysis.follow`) when the answer position's residual is patched from
  a source episode, when the residual is steered along the decoder's direction (the slope per
  unit α over the decoded move it asks for), and when a learned rank-k subspace is swapped
  from a source episode (on the held-out pairs: validation and test), each on the pairs of
  differing episodes (the ``any`` pairing).

Another test plugs in by :func:`~belieflens.analysis.power.register` with an object of the
:class:`~belieflens.analysis.power.InternalTest` shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.floor import Readout, readouts
from belieflens.analysis.follow import (
    INSTANCE_PAIR,
    Instances,
    instance_beliefs,
    instances,
    move_terms,
    oracle_move,
)
from belieflens.analysis.power import (
    Cell,
    Context,
    Family,
    Opened,
    RatioReading,
    Reading,
    TargetsFor,
    cell_mask,
    ratio_reading,
    register,
)
from belieflens.dims import DELIVERY, EPISODE, LAYER, POSITIONS, PROBE, TURN

I64 = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class EpisodeReading:
    """A floor read-out (:class:`~belieflens.analysis.floor.Readout`) as a reading."""

    episodes: I64
    layers: I64
    readout: Readout

    def values(self, weights: NDArray[np.float64]) -> NDArray[np.float64]:
        """The read-out's value per layer of the weighted episodes."""
        return self.readout.values(weights)


def _of(ds: xr.Dataset, r: Readout) -> EpisodeReading:
    order = np.unique(np.asarray(ds[EPISODE].values)).astype(np.int64)
    n = r.total.shape[1] if r.total is not None else len(r.layers)
    return EpisodeReading(order, np.arange(n, dtype=np.int64), r)


@dataclass(frozen=True)
class LensTest:
    """The logit lens: each layer's TVD to the oracle."""

    name: str = "logit-lens"
    family: Family = "decoder"
    higher_is_better: bool = False
    reads: str = "study"

    def read(self, side: Opened, context: Context) -> Reading | None:
        """The study's logit-lens TVD per episode and layer."""
        ds = side.study
        return _of(ds, readouts(ds, method=context.method, decoders=False,
                                seed=context.seed)[0])


@dataclass(frozen=True)
class DecoderTest:
    """The linear decoders of the oracle: each layer's held-out TVD."""

    name: str = "decoder"
    family: Family = "decoder"
    higher_is_better: bool = False
    reads: str = "study"

    def read(self, side: Opened, context: Context) -> Reading | None:
        """The study's held-out decoder TVD per episode and layer."""
        ds = side.study
        found = readouts(ds, method=context.method, decoders=True, seed=context.seed)
        return _of(ds, found[1]) if len(found) > 1 else None


@dataclass(frozen=True)
class GeometryTest:
    """A belief-geometry target: each layer's held-out R²."""

    target: str
    family: Family = "decoder"
    higher_is_better: bool = True
    reads: str = "study"

    @property
    def name(self) -> str:
        """``geometry: TARGET``, as the floors name it."""
        return f"geometry: {self.target}"

    def read(self, side: Opened, context: Context) -> Reading | None:
        """The target's held-out R² per layer (``None`` where the study lacks it)."""
        ds = side.study
        target = context.targets(ds).get(self.target)
        if target is None:
            return None
        found = readouts(ds, method=context.method, decoders=False, seed=context.seed,
                         targets={self.target: target})
        return _of(ds, found[-1])


def geometry_tests(targets: TargetsFor, ds: xr.Dataset) -> list[GeometryTest]:
    """A :class:`GeometryTest` per belief-geometry target of the study ``ds``."""
    return [GeometryTest(name) for name in targets(ds)]


# ----------------------------------------------------------------------------- follow


def _result(side: Opened, kind: str) -> xr.Dataset | None:
    path = side.results.get(kind)
    if path is None or not Path(path).exists():
        return None
    return xr.load_dataset(path, engine="h5netcdf")


def _kept(inst: Instances, left_out: frozenset[Cell], **only: tuple[str, ...]
          ) -> NDArray[np.bool_]:
    """The instance pairs of ``inst`` whose coordinates are among ``only``'s values and whose
    base and source cells are both held out."""
    c = inst.coords
    keep = np.ones(len(inst.rows), dtype=bool)
    for name, allowed in only.items():
        if name in c:
            keep &= np.isin(c[name].astype(str), allowed)
    for ep in ("episode", "source_episode"):
        if ep in c:
            keep &= ~cell_mask(c[DELIVERY], c[PROBE], c[ep], c[TURN], left_out)
    return keep


def _follow_reading(ds: xr.Dataset, inst: Instances, edited: xr.DataArray,
                    base: xr.DataArray, keep: NDArray[np.bool_]) -> RatioReading | None:
    """Follow per layer as per-episode sums of ``Δp · Δo`` and ``|Δo|²`` over the kept
    instance pairs (``edited`` with a ``layer`` dim)."""
    if not keep.any():
        return None
    d_oracle = oracle_move(ds, inst)
    num, den, _ = move_terms(edited, base, d_oracle)
    num = num.isel({INSTANCE_PAIR: np.flatnonzero(keep)}).transpose(INSTANCE_PAIR, LAYER)
    return ratio_reading(inst.coords[EPISODE][keep], num.values,
                         den.values[keep], ds[LAYER].values)


@dataclass(frozen=True)
class PatchTest:
    """Patching the answer position from a source episode: follow per layer."""

    name: str = "patch"
    family: Family = "intervention"
    higher_is_better: bool = True
    reads: str = "patch"

    def read(self, side: Opened, context: Context) -> Reading | None:
        """Follow of the patched output per layer on the pairs of differing episodes."""
        ds = _result(side, self.reads)
        if ds is None:
            return None
        inst = instances(ds, ("pairing",))
        keep = _kept(inst, side.left_out, pairing=("any",))
        edited = instance_beliefs(ds, "patched_logprob", inst, method=context.method)
        if POSITIONS in edited.dims:
            names = [str(p) for p in edited[POSITIONS].values] if POSITIONS in edited.coords \
                else [str(p) for p in ds[POSITIONS].values]
            edited = edited.isel({POSITIONS: names.index("answer") if "answer" in names
                                  else 0}, drop=True)
        base = instance_beliefs(ds, "base_logprob", inst, method=context.method)
        return _follow_reading(ds, inst, edited, base, keep)


@dataclass(frozen=True)
class InterchangeTest:
    """Swapping a learned rank-k subspace from a source episode: follow per layer."""

    name: str = "interchange"
    family: Family = "intervention"
    higher_is_better: bool = True
    reads: str = "interchange"

    def read(self, side: Opened, context: Context) -> Reading | None:
        """Follow of the swapped output per layer on the held-out pairs (validation and
        test) of differing episodes, for the network the file was run on (its first
        ``model``)."""
        ds = _result(side, self.reads)
        if ds is None:
            return None
        inst = instances(ds, ("split", "pairing"))
        keep = _kept(inst, side.left_out, pairing=("any",), split=("validation", "test"))
        first = {"model": 0}
        edited = instance_beliefs(ds, "swapped_logprob", inst,
                                  method=context.method).isel(first, drop=True)
        base = instance_beliefs(ds, "base_logprob", inst, method=context.method)
        if "model" in base.dims:
            base = base.isel(first, drop=True)
        return _follow_reading(ds, inst, edited, base, keep)


@dataclass(frozen=True)
class SteerTest:
    """Steering along the decoder's direction: the output's slope per unit α over the
    decoded move it asks for (1: the output moves as far as the decoded belief was moved)."""

    name: str = "steer"
    family: Family = "intervention"
    higher_is_better: bool = True
    reads: str = "steer"

    def read(self, side: Opened, context: Context) -> Reading | None:
        """Follow of the steered output per layer (``None`` for a file whose direction
        decodes no concept: no gains)."""
        from belieflens.analysis.interventions import steer_slopes

        ds = _result(side, self.reads)
        if ds is None or "fold_gain" not in ds or not np.isfinite(ds["fold_gain"].values).any():
            return None
        gain = ds["fold_gain"].mean("fold").where(lambda g: g > 0)
        slope = (steer_slopes(ds, method=context.method)["slope"] / gain.values)
        items = slope.stack(item=(DELIVERY, PROBE, EPISODE, TURN)).transpose("item", LAYER)
        idx = items["item"].to_index()
        cols = [np.asarray(idx.get_level_values(d)) for d in (DELIVERY, PROBE, EPISODE, TURN)]
        keep = ~cell_mask(cols[0], cols[1], cols[2], cols[3], side.left_out)
        vals = items.values[keep]
        return ratio_reading(cols[2][keep], vals, np.isfinite(vals).astype(np.float64),
                             ds[LAYER].values)


SHIPPED = (LensTest(), DecoderTest(), PatchTest(), SteerTest(), InterchangeTest())
"""The tests registered here (the geometry's are made per study: :func:`geometry_tests`)."""

for _test in SHIPPED:
    register(_test)
