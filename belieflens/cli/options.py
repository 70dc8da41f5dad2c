"""What the commands share: one-line errors and the options several commands take.

An option whose values are one of a set (``--device``, ``--debias``, ...) is annotated with
the set's ``Literal`` type but passed on as typed (``parser=str``): the library checks it,
once, and its one-line error names the option.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from belieflens.api import signals_handled
from belieflens.errors import BeliefLensError, InterruptedRunError
from belieflens.types import DebiasMethod, DeviceName


@contextmanager
def one_line_errors() -> Iterator[None]:
    """A :class:`BeliefLensError` raised inside becomes ``error: <message>`` on stderr and
    exit code 2; no traceback. A run stopped by SIGINT or SIGTERM
    (:class:`InterruptedRunError`) becomes ``interrupted: <message>`` and exit code 130 or
    143: every command handles both signals for its length (``belieflens.run.signals.handled``;
    a command that saves as it goes, ``extract`` or ``teach``, says what it saved), so none
    dies silently, and what it writes atomically is left whole or not at all."""
    try:
        with signals_handled():
            yield
    except InterruptedRunError as e:
        typer.echo(f"interrupted: {e}", err=True)
        raise typer.Exit(e.exit_code) from None
    except BeliefLensError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


def one_line_summaries(*apps: typer.Typer) -> None:
    """Give each command of ``apps`` its docstring's first paragraph, on one line, as the
    summary ``--help`` lists: typer keeps the docstring's own line breaks there, which cut a
    summary mid-sentence at any terminal width. A command given ``short_help`` keeps it."""
    for app in apps:
        for command in app.registered_commands:
            if command.short_help is None and command.callback is not None:
                doc = inspect.getdoc(command.callback) or ""
                command.short_help = " ".join(doc.split("\n\n")[0].split())


def wrote(path: Path) -> None:
    """Say that ``path`` was written."""
    typer.echo(f"wrote {path}")


Model = Annotated[str, typer.Option(help="embedded name, HF id, folder or .gguf")]
Device = Annotated[DeviceName, typer.Option(parser=str, help="cpu, cuda or auto")]
Threads = Annotated[int, typer.Option(help="CPU threads (0 = torch default)")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="replace an existing file")]
Debias = Annotated[DebiasMethod, typer.Option(parser=str, help="geometric or arithmetic")]
NoDecoders = Annotated[bool, typer.Option(
    "--no-decoders", help="skip the per-layer linear decoders")]
NoProbes = Annotated[bool, typer.Option(
    "--no-probes", hidden=True, help="deprecated spelling of --no-decoders")]
DecoderSeed = Annotated[int, typer.Option(
    "--seed", help="seed of the decoders' cross-validation folds")]


def skip_decoders(no_decoders: bool, no_probes: bool) -> bool:
    """Whether ``--no-decoders`` or its deprecated spelling ``--no-probes`` was given; the
    latter with one warning line on stderr."""
    if no_probes:
        typer.echo("warning: --no-probes is deprecated; use --no-decoders (a probe is a "
                   "belief question)", err=True)
    return no_decoders or no_probes
