"""What the commands share: one-line errors and the options several commands take.

An option whose values are one of a set (``--device``, ``--debias``, ...) is annotated with
the set's ``Literal`` type but passed on as typed (``parser=str``): the library checks it,
once, and its one-line error names the option.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from belieflens.errors import BeliefLensError, InterruptedRunError
from belieflens.types import DebiasMethod, DeviceName


@contextmanager
def one_line_errors() -> Iterator[None]:
    """A :class:`BeliefLensError` raised inside becomes ``error: <message>`` on stderr and
    exit code 2; no traceback. A run stopped by SIGINT or SIGTERM
    (:class:`InterruptedRunError`) becomes ``interrupted: <message>`` and exit code 130 or
    143."""
    try:
        yield
    except InterruptedRunError as e:
        typer.echo(f"interrupted: {e}", err=True)
        raise typer.Exit(e.exit_code) from None
    except BeliefLensError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


def wrote(path: Path) -> None:
    """Say that ``path`` was written."""
    typer.echo(f"wrote {path}")


Model = Annotated[str, typer.Option(help="embedded name, HF id, folder or .gguf")]
Device = Annotated[DeviceName, typer.Option(parser=str, help="cpu, cuda or auto")]
Threads = Annotated[int, typer.Option(help="CPU threads (0 = torch default)")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="replace an existing file")]
Debias = Annotated[DebiasMethod, typer.Option(parser=str, help="geometric or arithmetic")]
NoProbes = Annotated[bool, typer.Option("--no-probes", help="skip the per-layer linear probes")]
ProbeSeed = Annotated[int, typer.Option("--seed", help="seed of the probes' cross-validation "
                                        "folds")]
