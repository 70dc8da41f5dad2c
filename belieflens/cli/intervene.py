"""``belieflens intervene patch | steer | erase | interchange STUDY.h5 --out RESULT.h5``: one
library call each.

Each command parses its options into the intervention's options record and a
:class:`~belieflens.interventions.readouts.Selection`, makes one call of
:func:`belieflens.api.intervene` and prints the file written. Every user error prints one
line ``error: ...`` to stderr and exits with code 2; nothing is written.
``belieflens analyze RESULT.h5`` reads the result (:func:`belieflens.api.analyze`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from belieflens.api import (
    DEFAULT_ALPHAS,
    PAIRINGS,
    POSITION_SETS,
    DirectionKind,
    EraseAt,
    EraseOptions,
    InterchangeOptions,
    Pairing,
    PatchOptions,
    PositionSet,
    Selection,
    SteerAt,
    SteerOptions,
    intervene,
    parse_pair,
)
from belieflens.cli.options import Device, Overwrite, one_line_errors, wrote
from belieflens.errors import ParameterError, choice
from belieflens.types import DeviceName

T = TypeVar("T")

app = typer.Typer(
    no_args_is_help=True,
    help="Causal tests of where a belief lives: patch, steer, erase and interchange on a "
    "learned subspace of a study's read-outs.",
)


def parse_layers(text: str | None) -> tuple[int, ...] | None:
    """``--layers``: comma-separated layers and ranges (``0,4,10-12``); ``None``: all."""
    if text is None or text.strip() in ("", "all"):
        return None
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            out.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    except ValueError:
        raise ParameterError(
            f"option '--layers' = {text!r} is not allowed: layers and ranges like 0,4,10-12"
        ) from None
    return tuple(out)


def parse_alphas(text: str) -> tuple[float, ...]:
    """``--alphas``: comma-separated numbers."""
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ParameterError(
            f"option '--alphas' = {text!r} is not allowed: comma-separated numbers"
        ) from None


def parse_positions(text: str) -> tuple[PositionSet, ...]:
    """``--positions``: comma-separated position sets."""
    return tuple(choice("--positions", p.strip(), POSITION_SETS)
                 for p in text.split(",") if p.strip())


def _progress(quiet: bool, what: str) -> Callable[[int, int], None] | None:
    if quiet:
        return None

    def report(done: int, total: int) -> None:
        typer.echo(f"{what}: {done}/{total}", err=True)

    return report


Study = Annotated[Path, typer.Argument(help="study file written by `belieflens extract`")]
Out = Annotated[Path, typer.Option("--out", help="result file to write (.h5)")]
Model = Annotated[str | None, typer.Option(
    help="the study's model (embedded name, HF id, folder or .gguf; default: the study's)")]
Layers = Annotated[str | None, typer.Option(
    help="layers to intervene at, e.g. 0,4,10-12 (0 = embeddings; default: all)")]
Turns = Annotated[list[int] | None, typer.Option("--turn", help="only read-outs at this turn")]
Probes = Annotated[list[str] | None, typer.Option("--probe", help="only this probe question")]
Deliveries = Annotated[list[str] | None, typer.Option("--delivery", help="only this delivery")]
Episodes = Annotated[list[int] | None, typer.Option("--episode", help="only this episode")]
BatchSize = Annotated[int, typer.Option(help="read-outs (or pairs) per batch")]
Quiet = Annotated[bool, typer.Option("--quiet", help="no progress lines")]
Seed = Annotated[int, typer.Option(help="seed of the folds and random control directions")]
Folds = Annotated[int, typer.Option("--folds", help="cross-validation folds (by episode)")]


def _tuple(values: list[T] | None) -> tuple[T, ...] | None:
    return tuple(values) if values else None


def parse_pairings(text: str) -> tuple[Pairing, ...]:
    """``--pairing``: comma-separated pairings."""
    return tuple(choice("--pairing", p.strip(), PAIRINGS) for p in text.split(",") if p.strip())


def _run(study: Path, out: Path,
         options: PatchOptions | SteerOptions | EraseOptions | InterchangeOptions,
         select: Selection, *, model: str | None, device: DeviceName, overwrite: bool,
         quiet: bool) -> None:
    """The intervention ``options`` on the read-outs ``select`` names; prints the file
    written."""
    what = {PatchOptions: "pairs", InterchangeOptions: "layers"}.get(type(options), "read-outs")
    with one_line_errors():
        path = intervene(study, options, out=out, model=model, select=select,
                         overwrite=overwrite, device=device, on_progress=_progress(quiet, what))
    wrote(path)


@app.command("patch")
def patch_cmd(
    study: Study,
    out: Out,
    model: Model = None,
    pair: Annotated[list[str] | None, typer.Option(
        "--pair", help="BASE:SOURCE query indices (repeat; default: aligned episode pairs)")
    ] = None,
    turn: Turns = None,
    probe: Probes = None,
    delivery: Deliveries = None,
    layers: Layers = None,
    positions: Annotated[str, typer.Option(
        help="position sets: answer, evidence (tokens where base and source differ), all")
    ] = ",".join(POSITION_SETS),
    pairing: Annotated[str, typer.Option(
        help="how episodes pair: any (differing) or order (the same token counts in another "
        "order: the floor of an updater that counts)")] = "any",
    untrained: Annotated[list[str] | None, typer.Option(
        "--untrained", help="an untrained network patched the same way, the floor "
        "(random:SEED or shuffled:SEED; repeat)")] = None,
    batch_size: BatchSize = 8,
    device: Device = "cpu",
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Interchange patching: each base read-out with its source's residual stream patched in,
    per layer and position set."""
    with one_line_errors():
        options = PatchOptions(
            layers=parse_layers(layers), positions=parse_positions(positions),
            batch_pairs=batch_size, pairs=tuple(parse_pair(p) for p in pair) if pair else None,
            pairing=choice("--pairing", pairing, PAIRINGS), untrained=tuple(untrained or ()))
    select = Selection(turns=_tuple(turn), probes=_tuple(probe), deliveries=_tuple(delivery))
    _run(study, out, options, select, model=model, device=device, overwrite=overwrite,
         quiet=quiet)


@app.command("steer")
def steer_cmd(
    study: Study,
    out: Out,
    model: Model = None,
    layers: Layers = None,
    alphas: Annotated[str, typer.Option(
        help="steering strengths in SDs of the residuals along the direction (use --alphas=...)")
    ] = ",".join(f"{a:g}" for a in DEFAULT_ALPHAS),
    turn: Turns = None,
    probe: Probes = None,
    delivery: Deliveries = None,
    episode: Episodes = None,
    folds: Folds = 5,
    at: Annotated[SteerAt, typer.Option(
        parser=str, help="add the vector at the answer position, or at every position after "
        "the evidence (after-evidence)")] = "answer",
    direction: Annotated[DirectionKind, typer.Option(
        parser=str, help="the steering direction: the ridge decoder's weights, the difference "
        "of means (diff-means), or, on a token-level study, the direction raising the "
        "regressed belief in hidden state --state: its pattern in the residuals (belief) or the "
        "regression's least-norm shift (belief-decoder); cross-fitted by episode")
    ] = "ridge",
    state: Annotated[int, typer.Option(
        help="--direction belief: the hidden state whose belief the direction raises")] = 0,
    batch_size: BatchSize = 8,
    seed: Seed = 0,
    device: Device = "cpu",
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Steering: add alpha times the concept's direction (fitted without the read-out's
    episode) at the answer position (or every position after the evidence), per layer,
    against a random direction of equal norm."""
    with one_line_errors():
        options = SteerOptions(layers=parse_layers(layers), alphas=parse_alphas(alphas),
                               n_folds=folds, batch_size=batch_size, seed=seed, at=at,
                               direction=direction, state=state)
    _run(study, out, options, _select(turn, probe, delivery, episode), model=model,
         device=device, overwrite=overwrite, quiet=quiet)


@app.command("erase")
def erase_cmd(
    study: Study,
    out: Out,
    model: Model = None,
    layers: Layers = None,
    turn: Turns = None,
    probe: Probes = None,
    delivery: Deliveries = None,
    episode: Episodes = None,
    folds: Folds = 5,
    at: Annotated[EraseAt, typer.Option(
        parser=str, help="apply the eraser at the answer position or all")] = "answer",
    batch_size: BatchSize = 8,
    seed: Seed = 0,
    device: Device = "cpu",
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Erasure: LEACE of the oracle concept at the answer position, per layer (cross-fitted
    by episode), against a random subspace of equal rank."""
    with one_line_errors():
        options = EraseOptions(layers=parse_layers(layers), n_folds=folds,
                               batch_size=batch_size, seed=seed, at=at)
    _run(study, out, options, _select(turn, probe, delivery, episode), model=model,
         device=device, overwrite=overwrite, quiet=quiet)


@app.command("interchange")
def interchange_cmd(
    study: Study,
    out: Out,
    model: Model = None,
    layers: Layers = None,
    rank: Annotated[int, typer.Option(help="dimension k of the learned subspace")] = 1,
    steps: Annotated[int, typer.Option(help="optimiser steps per subspace")] = 200,
    lr: Annotated[float, typer.Option(help="learning rate (Adam)")] = 0.01,
    heldout: Annotated[float, typer.Option(
        help="share of the episodes held out (half validation, half test)")] = 0.5,
    controls: Annotated[int, typer.Option(
        help="random subspaces of the same rank swapped as the floor")] = 3,
    pairing: Annotated[str, typer.Option(
        help="pairings scored: any (differing episodes), order (the same token counts in "
        "another order)")] = ",".join(PAIRINGS),
    untrained: Annotated[list[str] | None, typer.Option(
        "--untrained", help="an untrained network run through the same procedure "
        "(random:SEED or shuffled:SEED; repeat)")] = None,
    turn: Turns = None,
    probe: Probes = None,
    delivery: Deliveries = None,
    episode: Episodes = None,
    batch_size: Annotated[int, typer.Option(help="pairs per training step")] = 64,
    seed: Annotated[int, typer.Option(
        help="seed of the split, the initial subspace and the random controls")] = 0,
    device: Device = "cpu",
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Interchange on a learned subspace: per layer, a rank-k subspace at the answer position
    learned by interchange on training episodes (DAS), swapped from source to base on
    held-out pairs and scored by how far the output follows the oracle, beside random
    subspaces and untrained networks."""
    with one_line_errors():
        options = InterchangeOptions(
            layers=parse_layers(layers), rank=rank, steps=steps, lr=lr, heldout=heldout,
            controls=controls, pairings=parse_pairings(pairing),
            untrained=tuple(untrained or ()), batch_pairs=batch_size, seed=seed)
    _run(study, out, options, _select(turn, probe, delivery, episode), model=model,
         device=device, overwrite=overwrite, quiet=quiet)


def _select(turn: list[int] | None, probe: list[str] | None, delivery: list[str] | None,
            episode: list[int] | None) -> Selection:
    """The read-outs the ``--turn``, ``--probe``, ``--delivery`` and ``--episode`` flags name."""
    return Selection(turns=_tuple(turn), probes=_tuple(probe), deliveries=_tuple(delivery),
                     episodes=_tuple(episode))
