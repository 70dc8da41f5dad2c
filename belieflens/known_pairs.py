"""``belieflens power``: every internal test run on known pairs, its power reported.

A known pair (:mod:`belieflens.analysis.power`) is given as study files: the network known to
hold the belief first, then its references. Its kind follows from the files' provenance: a
trained network beside untrained ones of its shape (``--init random:SEED``) is
``trained-untrained``; a taught adapter (``belieflens teach``) beside its base is
``taught-base``, and there every read-out whose prompt the adapter was taught
(:func:`belieflens.train.teach.trained_prompts`) is left out on both sides. Files of
different studies, architectures or environments are refused in one line naming the
mismatch.

The intervention tests read result files: for each side, those not yet in the output folder
are run there first (:func:`belieflens.interventions.intervene`, on the study's own network,
rebuilt untrained where the study's was; :class:`Recipe` sets the layers, read-outs and
training steps), and files already there are reused. Then every test reads every side and
:func:`belieflens.analysis.power.separation` sets them side by side.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis import power_tests
from belieflens.analysis.floor import study_attr, study_difference
from belieflens.analysis.power import (
    TESTS,
    Context,
    InternalTest,
    KnownPair,
    Opened,
    PairFacts,
    PairKind,
    Separation,
    Side,
    TargetsFor,
    check_power_episodes,
    check_references,
    held_out,
    left_out_cells,
    no_targets,
    power_dataset,
    separation,
)
from belieflens.analysis.power_record import study_kind
from belieflens.errors import ParameterError
from belieflens.interventions import (
    InterchangeOptions,
    PatchOptions,
    Selection,
    SteerOptions,
    intervene,
)
from belieflens.interventions.results import attr_value
from belieflens.model.load import LoadedModel
from belieflens.store.cache import cache_attrs, open_cache
from belieflens.types import DebiasMethod

OnProgress = Callable[[str], None]
"""Told what is being run or read, one line at a time."""

INTERVENTIONS = ("patch", "steer", "interchange")
"""The intervention kinds the shipped tests read."""


@dataclass(frozen=True)
class Recipe:
    """How the intervention tests' files are made: the layers, the read-outs (a
    :class:`~belieflens.interventions.Selection`), the steering strengths and folds, the
    interchange subspace's rank and training steps, and the seed."""

    layers: tuple[int, ...] | None = None
    select: Selection = field(default_factory=Selection)
    alphas: tuple[float, ...] = (-2.0, 0.0, 2.0)
    folds: int = 5
    rank: int = 1
    steps: int = 200
    seed: int = 0

    def options(self, kind: str) -> PatchOptions | SteerOptions | InterchangeOptions:
        """The options record of intervention ``kind``: patching the answer position on the
        pairs of differing episodes; steering along the ridge decoder's direction at the
        answer position; interchange on a rank-k subspace, pairs of differing episodes, one
        random subspace as its control."""
        if kind == "patch":
            return PatchOptions(layers=self.layers, positions=("answer",), pairing="any")
        if kind == "steer":
            return SteerOptions(layers=self.layers, alphas=self.alphas, n_folds=self.folds,
                                seed=self.seed)
        return InterchangeOptions(layers=self.layers, rank=self.rank, steps=self.steps,
                                  pairings=("any",), controls=1, seed=self.seed)


# ----------------------------------------------------------------------------- the pairs


def _attrs(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ParameterError(f"option '--pair': {path} does not exist")
    return cache_attrs(path)


def _same_study(name: str, first: Path, a: dict[str, Any], other: Path,
                b: dict[str, Any]) -> None:
    """One line naming the first way ``other`` is not the study ``first`` is."""
    differs = study_difference(a, b)
    if differs is not None:
        what, theirs, ours = differs
        raise ParameterError(
            f"pair {name!r}: {other} is another study than {first}: its {what} differs "
            f"({theirs} vs {ours}); a known pair is one study read from both networks")


def _init(a: dict[str, Any]) -> str:
    return str(study_attr(a, "model_init")) if "model_init" in a else "trained"


def pair_kind(name: str, attrs: Sequence[dict[str, Any]]) -> PairKind:
    """The kind of a pair from its files' attributes (the positive's first), or one line."""
    first, rest = attrs[0], attrs[1:]
    if _init(first) != "trained":
        raise ParameterError(f"pair {name!r}: its first file is an untrained network: the "
                             "first is the network known to hold the belief")
    if rest and all(_init(a) != "trained" for a in rest):
        check_references("trained-untrained", len(rest), name)
        return "trained-untrained"
    if str(study_attr(first, "model_source")) == "adapter" and len(rest) == 1 \
            and _init(rest[0]) == "trained":
        return "taught-base"
    raise ParameterError(
        f"pair {name!r}: a known pair is a trained network beside untrained ones of its "
        "shape (extract --init random:SEED), or a taught adapter beside its base: got "
        f"{', '.join(str(study_attr(a, 'model_spec')) + ' (' + _init(a) + ')' for a in attrs)}")


def _adapter_folder(spec: str) -> Path:
    from belieflens.model.load import ADAPTERS, adapter_folder

    return adapter_folder(spec) if spec in ADAPTERS else Path(spec).expanduser()


def taught_keys(positive: dict[str, Any], base: dict[str, Any],
                load: Callable[[str], LoadedModel]) -> frozenset[str]:
    """The prompt keys the adapter of the ``positive`` study was taught, once its base is
    checked to be the ``base`` study's model (one line if not)."""
    from belieflens.model.load import read_adapter_info
    from belieflens.train.teach import PROMPTS, trained_prompts

    spec = str(study_attr(positive, "model_spec"))
    folder = _adapter_folder(spec)
    info = read_adapter_info(folder)
    want = str(dict(info.get("base", {})).get("weights_hash", ""))
    have = str(study_attr(base, "weights_hash"))
    if want and have != want:
        raise ParameterError(f"the taught adapter {spec!r} was taught over weights "
                             f"{want[:12]}..., its reference's are {have[:12]}...: a "
                             "taught-base pair sets an adapter beside its own base")
    if (folder / PROMPTS).is_file():
        return trained_prompts(folder)
    base_spec = str(dict(info.get("base", {})).get("spec", study_attr(base, "model_spec")))
    return trained_prompts(folder, load(base_spec).tokenizer)


def known_pair(files: Sequence[str | os.PathLike[str]], *, load: Callable[[str], LoadedModel],
               out: Path) -> KnownPair:
    """The known pair of ``files`` (the positive network's study first), checked, with its
    intervention result files' paths in ``out``."""
    paths = [Path(f) for f in files]
    if len(paths) < 2:
        raise ParameterError(f"option '--pair' = {' '.join(map(str, paths))!r}: a pair is "
                             "the study of the network known to hold the belief, then its "
                             "references' studies")
    labels = side_labels(paths)
    name = f"{labels[0]} vs {', '.join(labels[1:])}"
    attrs = [_attrs(p) for p in paths]
    for p, a in zip(paths[1:], attrs[1:], strict=True):
        _same_study(name, paths[0], attrs[0], p, a)
    kind = pair_kind(name, attrs)
    check_power_episodes(int(str(study_attr(attrs[0], "episodes"))))
    keys = taught_keys(attrs[0], attrs[1], load) if kind == "taught-base" else frozenset()
    sides = [Side(p, {k: out / f"{lab}-{k}.h5" for k in INTERVENTIONS}, lab)
             for p, lab in zip(paths, labels, strict=True)]
    return KnownPair(name, kind, sides[0], tuple(sides[1:]), keys)


def side_labels(paths: Sequence[Path]) -> list[str]:
    """A name per study of a pair: its file stem, or ``FOLDER-STEM`` where two studies share
    a stem (a taught model's and its base's studies of one condition), so that their
    intervention files in ``--out`` do not collide."""
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    labels = [f"{p.resolve().parent.name}-{p.stem}" for p in paths]
    if len(set(labels)) == len(labels):
        return labels
    return [f"{i}-{s}" for i, s in enumerate(stems)]


# ----------------------------------------------------------------------------- running


def reused(result: Path, study: Path, options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``result`` is there to be reused: run on ``study`` and, where ``options`` (an
    intervention's ``option_*`` settings) are given, with each of them as given (one line
    where it was run on another study, say one re-extracted with other settings, or with
    other options, say other layers)."""
    from belieflens.store.results import open_result

    if not result.exists():
        return False
    with open_result(result) as r:
        attrs = dict(r.attrs)
    ran = str(attrs.get("study_fingerprint", ""))
    have = str(_attrs(study).get("study_fingerprint", ""))
    if ran != have:
        raise ParameterError(f"{result} was run on another study than {study} (fingerprint "
                             f"{ran[:12]}, the study's {have[:12]}): remove it or choose "
                             "another --out")
    for key, want in (options or {}).items():
        got = attrs.get(f"option_{key}")
        if want is not None and got is not None and str(got) != str(attr_value(want)):
            raise ParameterError(f"{result} was run with {key} {got}, not {attr_value(want)}: "
                                 "remove it or choose another --out")
    return True


def recipe_settings(recipe: Recipe, kind: str) -> dict[str, Any]:
    """The settings a result file of intervention ``kind`` made by ``recipe`` records (its
    ``option_*`` attributes; ``None`` where the recipe leaves one to the default)."""
    settings = dataclasses.asdict(recipe.options(kind))
    settings.update(turns=recipe.select.turns, probes=recipe.select.probes,
                    deliveries=recipe.select.deliveries)
    return {k: v for k, v in settings.items() if k != "pairs"}


def run_interventions(pair: KnownPair, kinds: Sequence[str], recipe: Recipe, *,
                      on_progress: OnProgress | None = None) -> None:
    """Every intervention result of ``kinds`` that a side of ``pair`` lacks, run on its
    study's own network (rebuilt untrained where the study's was; loaded once per side)."""
    from belieflens.interventions.model import model_for
    from belieflens.interventions.readouts import read_study

    for side in (pair.positive, *pair.references):
        todo = [k for k in kinds
                if not reused(side.results[k], side.study, recipe_settings(recipe, k))]
        if not todo:
            continue
        model = model_for(None, read_study(side.study, need=()))
        for kind in todo:
            if on_progress is not None:
                on_progress(f"{kind} on {side.study.name}")
            intervene(side.study, recipe.options(kind), out=side.results[kind], model=model,
                      select=recipe.select)


def _open(side: Side, label: str, cells: frozenset[Any]) -> Opened:
    return Opened(label, held_out(open_cache(side.study), cells), side.results, cells)


def read_pair(pair: KnownPair, tests: Sequence[InternalTest], context: Context, *,
              on_progress: OnProgress | None = None
              ) -> tuple[dict[tuple[str, str], Separation], PairFacts]:
    """Each test's separation of ``pair`` (a test a side cannot read is left out), and the
    pair's facts."""
    sides = [pair.positive, *pair.references]
    with open_cache(pair.positive.study) as first:
        cells = left_out_cells(first, pair.left_out)
        facts = _facts(pair, first, cells)
    opened = [_open(s, s.name, cells) for s in sides]
    found: dict[tuple[str, str], Separation] = {}
    try:
        for test in tests:
            if on_progress is not None:
                on_progress(f"{test.name} on {pair.name}")
            got = [test.read(o, context) for o in opened]
            reads = [r for r in got if r is not None]
            if len(reads) < len(got):
                continue
            rng = np.random.default_rng(context.seed)
            found[(test.name, pair.name)] = separation(test, pair.kind, reads[0], reads[1:],
                                                       rng)
    finally:
        for o in opened:
            o.study.close()
    return found, facts


def _facts(pair: KnownPair, ds: xr.Dataset, cells: frozenset[Any]) -> PairFacts:
    env, models = study_kind(ds.attrs)
    kept = held_out(ds, cells).sizes["query"]
    return PairFacts(pair.name, pair.kind, env, models, pair.positive.name,
                     ", ".join(r.name for r in pair.references),
                     int(str(study_attr(ds.attrs, "episodes"))),
                     int(str(study_attr(ds.attrs, "model_n_layers"))),
                     int(ds.sizes["query"] - kept))


def tests_for(names: Sequence[str] | None, first_study: Path,
              targets: TargetsFor) -> list[InternalTest]:
    """The tests ``names`` (``None``: every registered one and the study's geometry targets),
    each once; an unknown name is one line."""
    with open_cache(first_study) as ds:
        geometry = power_tests.geometry_tests(targets, ds)
    known: dict[str, InternalTest] = {**TESTS, **{g.name: g for g in geometry}}
    if names is None:
        return list(known.values())
    unknown = [n for n in names if n not in known and not n.startswith("geometry")]
    if unknown:
        raise ParameterError(f"option '--tests' = {','.join(unknown)!r} is not allowed: "
                             f"choose from {', '.join(known)}")
    return [t for n, t in known.items() if n in names
            or (n.startswith("geometry") and "geometry" in names)]


def power(
    pairs: Sequence[Sequence[str | os.PathLike[str]]],
    out: str | os.PathLike[str],
    *,
    tests: Sequence[str] | None = None,
    recipe: Recipe | None = None,
    method: DebiasMethod = "geometric",
    seed: int = 0,
    targets: TargetsFor = no_targets,
    load: Callable[[str], LoadedModel],
    on_progress: OnProgress | None = None,
) -> xr.Dataset:
    """The power Dataset (:func:`belieflens.analysis.power.power_dataset`) of every test
    ``tests`` (default: all) on every known pair of ``pairs`` (each its study files, the
    positive network's first), the intervention results run into ``out`` where missing."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    known = [known_pair(files, load=load, out=folder) for files in pairs]
    context = Context(method=method, seed=seed, targets=targets)
    every: dict[str, InternalTest] = {}
    found: dict[tuple[str, str], Separation] = {}
    facts: list[PairFacts] = []
    for pair in known:
        chosen = tests_for(tests, pair.positive.study, targets)
        every.update({t.name: t for t in chosen})
        kinds = sorted({t.reads for t in chosen if t.reads != "study"})
        run_interventions(pair, kinds, recipe or Recipe(seed=seed), on_progress=on_progress)
        got, fact = read_pair(pair, chosen, context, on_progress=on_progress)
        found.update(got)
        facts.append(fact)
    ds = power_dataset(found, list(every.values()), facts)
    ds.to_netcdf(folder / "power.nc", engine="h5netcdf")
    return ds


@dataclass(frozen=True)
class PowerRun:
    """What ``belieflens power`` produced: the Dataset, its text and the files written."""

    dataset: xr.Dataset
    text: str
    files: tuple[Path, ...]


def written(ds: xr.Dataset, out: Path, *, results: str | None, record: bool,
            recorder: Any = None) -> PowerRun:
    """``ds`` as text, with the results files ``docs/results/NAME.md`` and ``.json``
    (``results``; ``recorder``: a :func:`belieflens.results.start` begun with the run) and
    the shipped power record updated (``record``: its pairs replaced, the others kept)."""
    from belieflens import results as written_results
    from belieflens.analysis.power_record import load_record, merge, record_of, save_record
    from belieflens.report.power import COLUMNS, format_power, power_rows

    files = [out / "power.nc"]
    if results:
        rec = recorder if recorder is not None else written_results.start()
        data = {"separation": {f"{p} | {t}": [None if not np.isfinite(v) else round(float(v), 6)
                                              for v in ds["separation"].sel(pair=p, test=t).values]
                               for p in ds["pair"].values for t in ds["test"].values}}
        files.append(rec.write(results, COLUMNS, power_rows(ds), data=data, note=(
            f"{ds.attrs['correction']}; intervals: {ds.attrs['interval']}")))
    if record:
        header = {"command": written_results.command_line(), "commit": written_results.commit(),
                  "date": str(np.datetime64("now", "m")).replace("T", " ") + " UTC"}
        files.append(save_record(merge(load_record(), record_of(ds, header))))
    return PowerRun(ds, format_power(ds), tuple(files))
