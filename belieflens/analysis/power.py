"""Power: whether each internal test finds a belief where one is known to be.

A test of what a network holds inside (a lens, a decoder, a belief geometry, an intervention
scored by follow) says something about a model only where it has been seen to find a belief
that is known to be there. A **known pair** is one study read from two kinds of network, one
known to hold the belief and one known not to:

- ``trained-untrained``: a toy trained on its process (its output updates like the
  posterior), beside untrained networks of its shape (``--init random:SEED``, at least
  :data:`~belieflens.analysis.floor_test.MIN_CONTROLS`);
- ``taught-base``: a taught adapter (its output updates like the posterior) beside its base
  model, on a study held out from its teaching: every read-out whose prompt the adapter was
  taught is left out on both sides (:func:`left_out_cells`, :func:`held_out`).

Each test (:class:`InternalTest`; the shipped ones in
:mod:`belieflens.analysis.power_tests`, more by :func:`register`) reads from one network's
files a per-layer statistic as per-episode terms (a :class:`Reading`), so that every resample
of the episodes gives its value, and the same resample is taken on every side. A test
**separates** a pair at a layer where the network known to hold the belief is better there
(closer to the oracle, more variance explained, more follow) beyond an interval that holds
over all layers at once (95%, max-T: :mod:`belieflens.analysis.floor_test`): against
untrained networks the interval covers the spread from one seed to the next too
(:func:`~belieflens.analysis.floor_test.beyond_floor`), against a base the paired episode
bootstrap alone (:func:`~belieflens.analysis.floor_test.beyond_value`). A test has **shown
power** on a pair where it separates it at one layer at least;
:func:`~belieflens.known_pairs.power` gives the Dataset over ``(test, pair, layer)``, and
:mod:`belieflens.analysis.power_record` keeps what it found for the reports' marks.

Examples:
    A reading made by hand: two episodes, one layer, the value a ratio of sums:

    >>> import numpy as np
    >>> r = RatioReading(np.array([0, 1]), np.array([0]), np.array([[1.0], [3.0]]),
    ...                  np.array([[2.0], [2.0]]))
    >>> r.values(np.array([[1.0, 1.0], [2.0, 0.0]])).round(2).tolist()
    [[1.0], [0.5]]
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, get_args

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from belieflens.analysis.floor_test import (
    CORRECTION,
    LEVEL,
    MIN_CONTROLS,
    Beyond,
    beyond_floor,
    beyond_value,
    min_bootstrap_episodes,
)
from belieflens.analysis.geometry import Target
from belieflens.dims import DELIVERY, EPISODE, LAYER, PROBE, QUERY, TURN
from belieflens.errors import ParameterError
from belieflens.readouts.render import prompt_key
from belieflens.types import DebiasMethod

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

Family = Literal["decoder", "intervention"]
"""What kind of internal test: a read-out of the residual stream (``decoder``: lenses,
decoders, the belief geometry) or an edit of it scored at the output (``intervention``)."""

PairKind = Literal["trained-untrained", "taught-base"]
"""A known pair: a trained toy beside untrained networks, or a taught adapter beside its
base."""

PAIR_KINDS: tuple[PairKind, ...] = get_args(PairKind)

TEST = "test"
PAIR = "pair"
BOOTSTRAP = 1000
"""Bootstrap replicates behind each interval."""

Cell = tuple[str, str, int, int]
"""One belief question's read-outs: ``(delivery, probe, episode, turn)``."""

TargetsFor = Callable[[xr.Dataset], Mapping[str, Target]]
"""A study to its belief-geometry targets (``belieflens.envs.readout_targets``)."""


def no_targets(ds: xr.Dataset) -> Mapping[str, Target]:
    """No belief-geometry targets."""
    return {}


class Reading(Protocol):
    """One network's per-layer statistic of one test, as per-episode terms: its value on any
    weighting of the episodes (a bootstrap resample: how often each is drawn)."""

    @property
    def episodes(self) -> I64:
        """The episodes the terms are over, sorted (the last axis of ``weights``)."""
        ...

    @property
    def layers(self) -> I64:
        """The layers it reads (the last axis of :meth:`values`)."""
        ...

    def values(self, weights: F64) -> F64:
        """The statistic ``[..., layer]`` of the episodes weighted ``weights [...,
        episode]``."""
        ...


@dataclass(frozen=True, eq=False)
class RatioReading:
    """A statistic that is a ratio of sums over episodes: a mean TVD (Σ TVD over the read-outs
    / their number), follow (Σ Δp·Δo / Σ |Δo|²), a mean slope."""

    episodes: I64
    layers: I64
    num: F64
    """``[episode, layer]``."""
    den: F64
    """``[episode, layer]``."""

    def values(self, weights: F64) -> F64:
        """``(weights @ num) / (weights @ den)``; NaN where nothing is weighted."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray((weights @ self.num) / (weights @ self.den), dtype=np.float64)


def ratio_reading(episode: NDArray[np.integer], num: F64, den: F64,
                  layers: Sequence[int] | NDArray[np.integer]) -> RatioReading:
    """A :class:`RatioReading` from per-item terms: the items' ``episode [n]``, ``num [n,
    layer]`` and ``den [n]`` or ``[n, layer]`` (an item with a NaN term adds nothing)."""
    ep = np.asarray(episode, dtype=np.int64)
    order = np.unique(ep)
    at = np.searchsorted(order, ep)
    n = np.asarray(num, dtype=np.float64).reshape(ep.size, -1)
    d = np.broadcast_to(np.asarray(den, dtype=np.float64).reshape(ep.size, -1), n.shape)
    ok = np.isfinite(n) & np.isfinite(d)
    num_e = np.zeros((order.size, n.shape[1]))
    den_e = np.zeros_like(num_e)
    np.add.at(num_e, at, np.where(ok, n, 0.0))
    np.add.at(den_e, at, np.where(ok, d, 0.0))
    return RatioReading(order, np.asarray(layers, dtype=np.int64), num_e, den_e)


@dataclass(frozen=True)
class Side:
    """One network of a known pair, by its files: its study (a cache file) and the result
    files of the interventions run on it, by kind (``patch``, ``steer``, ``interchange``);
    ``label`` names it where studies of one file name sit in different folders."""

    study: Path
    results: Mapping[str, Path] = field(default_factory=dict)
    label: str = ""

    @property
    def name(self) -> str:
        """How reports name this network: its label, else its study's file stem."""
        return self.label or self.study.stem


@dataclass(frozen=True, eq=False)
class Opened:
    """One network's files as a test reads them: its study with the left-out read-outs
    removed (:func:`held_out`), the left-out cells (an intervention's pairs that touch one are
    dropped) and its intervention result files."""

    label: str
    study: xr.Dataset
    results: Mapping[str, Path]
    left_out: frozenset[Cell] = frozenset()


@dataclass(frozen=True)
class Context:
    """How every test reads: the debiasing, the seed of its folds and bootstraps, and the
    belief-geometry targets of a study."""

    method: DebiasMethod = "geometric"
    seed: int = 0
    targets: TargetsFor = no_targets


class InternalTest(Protocol):
    """An internal test: a per-layer statistic of one network's files (:class:`Reading`)."""

    @property
    def name(self) -> str:
        """Its name, as reports name the read-out (``logit-lens``, ``decoder``, ...)."""
        ...

    @property
    def family(self) -> Family:
        """``decoder`` or ``intervention``."""
        ...

    @property
    def higher_is_better(self) -> bool:
        """Whether a larger value is closer to the belief (R², follow) or a smaller one (a
        TVD to the oracle)."""
        ...

    @property
    def reads(self) -> str:
        """``study``, or the kind of intervention result it reads (``patch``, ...)."""
        ...

    def read(self, side: Opened, context: Context) -> Reading | None:
        """Its reading of ``side``; ``None`` where the side lacks what it reads."""
        ...


TESTS: dict[str, InternalTest] = {}
"""Every registered test by name, in the order registered
(:mod:`belieflens.analysis.power_tests` registers the shipped ones)."""


def register(test: InternalTest) -> InternalTest:
    """Add ``test`` to :data:`TESTS` (replacing one of the same name); returns it."""
    TESTS[test.name] = test
    return test


@dataclass(frozen=True)
class KnownPair:
    """A study read from a network known to hold the belief (``positive``) and from networks
    known not to (``references``: the base, or untrained seeds)."""

    name: str
    kind: PairKind
    positive: Side
    references: tuple[Side, ...]
    left_out: frozenset[str] = frozenset()
    """Prompt keys (:func:`~belieflens.readouts.render.prompt_key`) of read-outs the positive
    network was taught: left out on every side."""


# ----------------------------------------------------------------------------- held out


def left_out_cells(ds: xr.Dataset, keys: Collection[str]) -> frozenset[Cell]:
    """The cells (:data:`Cell`) of ``ds`` one of whose read-outs has a prompt key in
    ``keys``: a belief question is left out whole, every rotation, when any was taught."""
    if not keys:
        return frozenset()
    prompts = np.asarray(ds["prompt"].values).astype(str)
    taught = np.array([prompt_key(p) in keys for p in prompts], dtype=bool)
    cols = [np.asarray(ds[d].values) for d in (DELIVERY, PROBE, EPISODE, TURN)]
    return frozenset((str(cols[0][q]), str(cols[1][q]), int(cols[2][q]), int(cols[3][q]))
                     for q in np.flatnonzero(taught))


def cell_mask(delivery: NDArray[np.generic], probe: NDArray[np.generic],
              episode: NDArray[np.generic], turn: NDArray[np.generic],
              cells: Collection[Cell]) -> NDArray[np.bool_]:
    """Whether each item (its delivery, probe, episode and turn) is in ``cells``."""
    if not cells:
        return np.zeros(np.shape(episode), dtype=bool)
    return np.array([(str(d), str(p), int(e), int(t)) in cells for d, p, e, t in zip(
        delivery.tolist(), probe.tolist(), episode.tolist(), turn.tolist(), strict=True)],
        dtype=bool)


def held_out(ds: xr.Dataset, cells: Collection[Cell]) -> xr.Dataset:
    """``ds`` without the read-outs of ``cells``."""
    if not cells:
        return ds
    cols = [np.asarray(ds[d].values) for d in (DELIVERY, PROBE, EPISODE, TURN)]
    drop = cell_mask(cols[0], cols[1], cols[2], cols[3], cells)
    return ds.isel({QUERY: np.flatnonzero(~drop)})


# ----------------------------------------------------------------------------- separation


@dataclass(frozen=True)
class Separation:
    """One test on one pair: each side's value per layer and the separation with its
    interval (positive = the network known to hold the belief is better)."""

    layers: I64
    positive: F64
    references: F64
    """``[reference, layer]``."""
    beyond: Beyond


def _aligned(readings: Sequence[Reading], weights: F64, union: I64) -> tuple[F64, F64]:
    """Each reading's value per layer on all episodes and on every replicate ``weights
    [replicate, episode of union]``: ``[reading, layer]`` and ``[reading, replicate,
    layer]``."""
    one = np.ones(union.size)
    cols = [np.searchsorted(union, r.episodes) for r in readings]
    return (np.stack([r.values(one[c]) for r, c in zip(readings, cols, strict=True)]),
            np.stack([r.values(weights[:, c]) for r, c in zip(readings, cols, strict=True)]))


def separation(test: InternalTest, kind: PairKind, positive: Reading,
               references: Sequence[Reading], rng: np.random.Generator,
               n_boot: int = BOOTSTRAP) -> Separation:
    """How far ``positive`` is beyond ``references`` at each layer (module docstring), with
    the interval of the pair's kind, from ``n_boot`` resamples of the episodes (the same on
    every side)."""
    readings = [positive, *references]
    layers = positive.layers
    if any(not np.array_equal(r.layers, layers) for r in references):
        raise ParameterError(f"{test.name}: the pair's sides read different layers")
    union = np.unique(np.concatenate([r.episodes for r in readings]))
    check_power_episodes(union.size, n_boot)
    w = rng.multinomial(union.size, np.full(union.size, 1.0 / union.size),
                        size=n_boot).astype(np.float64)
    value, boot = _aligned(readings, w, union)
    sign = 1.0 if test.higher_is_better else -1.0
    if kind == "taught-base":
        found = beyond_value(value[0], boot[0], value[1], boot[1], sign=sign)
    else:
        found = beyond_floor(value[0], boot[0], value[1:], boot[1:], rng, sign=sign)
    return Separation(layers, value[0], value[1:], found)


def min_power_episodes(n_boot: int = BOOTSTRAP) -> int:
    """The fewest episodes a test's interval takes: as many as ``n_boot`` distinct
    resamples need (:func:`~belieflens.analysis.floor_test.min_bootstrap_episodes`)."""
    return min_bootstrap_episodes(n_boot)


def check_power_episodes(n_episodes: int, n_boot: int = BOOTSTRAP) -> None:
    """One line (:class:`ParameterError`) giving the minimum where a reading holds too few
    episodes for its interval."""
    least = min_power_episodes(n_boot)
    if n_episodes < least:
        raise ParameterError(
            f"too few episodes for power: {n_episodes} (the {n_boot} bootstrap replicates "
            f"need at least {least} distinct episodes); extract the pair's studies with "
            f"--episodes {max(least, 24)} or more")


def check_references(kind: PairKind, n_references: int, name: str) -> None:
    """One line unless a pair has the references its kind takes: one base, or at least
    :data:`~belieflens.analysis.floor_test.MIN_CONTROLS` untrained networks."""
    if kind == "taught-base" and n_references != 1:
        raise ParameterError(f"pair {name!r}: a taught adapter stands beside one base, got "
                             f"{n_references} reference files")
    if kind == "trained-untrained" and n_references < MIN_CONTROLS:
        raise ParameterError(f"pair {name!r}: a trained network stands beside at least "
                             f"{MIN_CONTROLS} untrained ones (their spread is the seeds' part "
                             f"of the interval), got {n_references}")


# ----------------------------------------------------------------------------- the Dataset


@dataclass(frozen=True)
class PairFacts:
    """What the Dataset says about a pair beside its tests: its kind, environment, the
    network known to hold the belief, its references, episodes and layers, and the read-outs
    left out."""

    name: str
    kind: PairKind
    env: str
    models: str
    """``toy`` or ``language model``: the kind of network (what a study's marks match)."""
    positive: str
    references: str
    episodes: int
    n_layers: int
    left_out: int
    """Read-outs left out of the positive side's study."""


PAIR_COORDS: dict[str, str] = {
    "kind": "kind", "env": "env", "models": "models", "positive_network": "positive",
    "reference_networks": "references", "episodes": "episodes", "n_layers": "n_layers",
    "left_out": "left_out"}
"""The Dataset's coordinates on ``pair`` and the :class:`PairFacts` field each holds."""

VARIABLES: tuple[str, ...] = ("positive", "reference", "reference_min", "reference_max",
                              "separation", "separation_low", "separation_high")
"""The per-layer variables of :func:`power_dataset` (``separates`` besides)."""


def _columns(s: Separation, n: int) -> dict[str, F64]:
    """A separation's per-layer variables on layers ``0..n-1`` (NaN where not read)."""
    out = {k: np.full(n, np.nan) for k in VARIABLES}
    at = s.layers
    refs = s.references
    for k, v in (("positive", s.positive), ("reference", refs.mean(axis=0)),
                 ("reference_min", refs.min(axis=0)), ("reference_max", refs.max(axis=0)),
                 ("separation", s.beyond.selectivity), ("separation_low", s.beyond.low),
                 ("separation_high", s.beyond.high)):
        out[k][at] = v
    return out


def power_dataset(found: Mapping[tuple[str, str], Separation], tests: Sequence[InternalTest],
                  pairs: Sequence[PairFacts]) -> xr.Dataset:
    """The Dataset of :func:`~belieflens.known_pairs.power` from each (test, pair) separation
    found (a pair a test could not read is absent: NaN, ``read`` false)."""
    n = max((p.n_layers for p in pairs), default=0) + 1
    shape = (len(tests), len(pairs), n)
    data = {k: np.full(shape, np.nan) for k in VARIABLES}
    critical = np.full(shape[:2], np.nan)
    read = np.zeros(shape[:2], dtype=bool)
    for i, t in enumerate(tests):
        for j, p in enumerate(pairs):
            s = found.get((t.name, p.name))
            if s is None:
                continue
            read[i, j] = True
            critical[i, j] = s.beyond.critical
            for k, v in _columns(s, n).items():
                data[k][i, j] = v
    dims = (TEST, PAIR, LAYER)
    ds = xr.Dataset({k: (dims, v) for k, v in data.items()},
                    coords={TEST: [t.name for t in tests], PAIR: [p.name for p in pairs],
                            LAYER: np.arange(n)})
    return _finish(ds, read, critical, tests, pairs)


def _finish(ds: xr.Dataset, read: NDArray[np.bool_], critical: F64,
            tests: Sequence[InternalTest], pairs: Sequence[PairFacts]) -> xr.Dataset:
    """The flags, the per-(test, pair) summary and the coordinates of :func:`power_dataset`."""
    from belieflens.analysis.floor_test import TOLERANCE

    low, high = ds["separation_low"].values, ds["separation_high"].values
    with np.errstate(invalid="ignore"):
        ds["separates"] = ((TEST, PAIR, LAYER), low > TOLERANCE)
        ds["reversed"] = ((TEST, PAIR), (high < -TOLERANCE).any(axis=-1))
    ds["power"] = ds["separates"].any(LAYER)
    ds["read"] = ((TEST, PAIR), read)
    ds["critical"] = ((TEST, PAIR), critical)
    best = ds["separation_low"].fillna(-np.inf).argmax(LAYER)  # the most surely separated
    ds["best_layer"] = best.where(ds["read"], -1)
    ds = ds.assign_coords({
        "family": (TEST, [t.family for t in tests]),
        "higher_is_better": (TEST, [t.higher_is_better for t in tests]),
        **{name: (PAIR, [getattr(p, f) for p in pairs]) for name, f in PAIR_COORDS.items()}})
    ds["separation"].attrs["description"] = (
        "how far the network known to hold the belief is beyond its reference(s), positive = "
        "better (TVD: reference - positive; R2 and follow: positive - reference)")
    ds.attrs.update({"level": LEVEL, "correction": CORRECTION, "bootstrap": BOOTSTRAP,
                     "interval": "taught-base: paired bootstrap over episodes; "
                     "trained-untrained: the same plus one more untrained seed's deviation "
                     "(Student's t over the references' spread)"})
    return ds
