"""The ``belieflens`` command line: one command, one library call.

Every user error (bad parameter, unknown model, unreadable file) prints one
line ``error: ...`` to stderr and exits with code 2; no traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from belieflens.errors import BeliefLensError, ParameterError
from belieflens.types import DebiasMethod, DeviceName, DTypeName, PaddingSide, StoreDTypeName

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="What a language model believes, turn by turn and layer by layer.",
)


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@app.command()
def envs() -> None:
    """List environments with their parameters, types and defaults."""
    from belieflens import envs as registry

    for name in registry.names():
        doc, params = registry.describe(name)
        typer.echo(f"{name}: {doc}")
        for p in params:
            typer.echo(f"    {p.name} ({p.type}, default {p.default!r}): {p.help}")
        typer.echo("")


@app.command()
def extract(
    env: Annotated[str, typer.Argument(help="environment name (see `belieflens envs`)")],
    out: Annotated[Path, typer.Option("--out", help="cache file to write (.h5)")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="environment parameter NAME=VALUE")
    ] = None,
    model: Annotated[str, typer.Option(help="embedded name, HF id, folder or .gguf")] = (
        "smollm2-135m"
    ),
    episodes: Annotated[int, typer.Option(help="number of episodes")] = 4,
    seed: Annotated[int, typer.Option(help="random seed of the environment")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto")] = "cpu",
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16")] = "float32",
    batch_size: Annotated[int, typer.Option(help="max rows per forward batch")] = 16,
    max_tokens: Annotated[int, typer.Option(help="max padded tokens per batch")] = 8192,
    threads: Annotated[int, typer.Option(help="CPU threads (0 = torch default)")] = 0,
    padding: Annotated[str, typer.Option(help="padding side: right or left")] = "right",
    save_logits: Annotated[
        bool, typer.Option("--save-logits", help="also store full next-token log-probs")
    ] = False,
    resid_dtype: Annotated[
        str, typer.Option(help="residual storage dtype: float32 or float16 (lossy)")
    ] = "float32",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing file")] = (
        False
    ),
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress bar")] = False,
    cont_resid: Annotated[
        bool, typer.Option("--cont-resid", help="store residuals at multi-token continuation "
                           "positions (for the multi-token lens; large)")
    ] = False,
    no_prefix_reuse: Annotated[
        bool, typer.Option("--no-prefix-reuse", help="run every query on its full prompt")
    ] = False,
) -> None:
    """Run every read-out of an environment through a model and write a cache file."""
    from belieflens import envs as registry
    from belieflens.envs.params import parse_assignments

    try:
        _choice("--device", device, DeviceName)
        _choice("--dtype", dtype, DTypeName)
        _choice("--padding", padding, PaddingSide)
        _choice("--resid-dtype", resid_dtype, StoreDTypeName)
        if threads < 0:
            raise ParameterError(f"option '--threads' = {threads} is not allowed: >= 0")
        if out.exists() and not overwrite:
            raise ParameterError(f"{out} exists; pass --overwrite to replace it")
        if out.exists() and out.is_dir():
            raise ParameterError(f"--out {out} is a directory")
        from belieflens.cache.extract import ExtractOptions

        options = ExtractOptions(
            episodes=episodes, seed=seed, max_rows=batch_size, max_tokens=max_tokens,
            save_logits=save_logits, padding_side=padding,  # type: ignore[arg-type]
            resid_dtype=resid_dtype, threads=threads,  # type: ignore[arg-type]
            reuse_prefix=not no_prefix_reuse, cont_resid=cont_resid,
        )
        environment = registry.get(env, **parse_assignments(set_ or []))
        from belieflens.cache.models import resolve

        resolve(model)  # fail fast, before any heavy import or work
        _run_extract(environment, out, options, model, device, dtype, threads, quiet)
    except BeliefLensError as e:
        _fail(str(e))


def _choice(option: str, value: str, literal: Any) -> None:
    from typing import get_args

    allowed = get_args(literal)
    if value not in allowed:
        raise ParameterError(
            f"option '{option}' = {value!r} is not allowed: one of {', '.join(allowed)}"
        )


def _run_extract(environment: Any, out: Path, options: Any, model: str, device: str,
                 dtype: str, threads: int, quiet: bool) -> None:
    import torch
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from belieflens.cache import extract as ex
    from belieflens.cache.models import load

    if threads:
        torch.set_num_threads(threads)
    with _QuietLibraries():
        loaded = load(model, device=device, dtype=dtype)  # type: ignore[arg-type]
    typer.echo(
        f"model {loaded.info.official_id} ({loaded.info.n_layers} layers, {loaded.info.dtype}, "
        f"{loaded.info.device}, {torch.get_num_threads()} threads) loaded in "
        f"{loaded.info.load_seconds:.1f}s", err=True,
    )
    columns = (
        TextColumn("[bold]extract"), BarColumn(), MofNCompleteColumn(),
        TextColumn("queries · {task.fields[tps]} tok/s"), TimeElapsedColumn(),
        TextColumn("ETA"), TimeRemainingColumn(),
    )
    with Progress(*columns, disable=quiet, transient=False) as bar:
        task = bar.add_task("extract", total=None, tps="-")

        def report(p: ex.Progress) -> None:
            tps = f"{p.tokens / p.seconds:,.0f}" if p.seconds > 0 else "-"
            bar.update(task, completed=p.done, total=p.total, tps=tps)

        path = ex.extract(environment, loaded, out, options, on_progress=report)
    typer.echo(f"wrote {path}")


class _QuietLibraries:
    """Silence transformers' progress bars and warnings while loading."""

    def __enter__(self) -> None:
        import logging
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        logging.getLogger("transformers").setLevel(logging.ERROR)
        logging.getLogger("transformer_lens").setLevel(logging.ERROR)
        logging.getLogger().setLevel(logging.ERROR)
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        except ImportError:  # pragma: no cover
            pass

    def __exit__(self, *exc: object) -> None:
        return None


@app.command()
def analyze(
    file: Annotated[Path, typer.Argument(help="cache file written by `belieflens extract`")],
    out: Annotated[Path | None, typer.Option("--out", help="folder for PNGs and report.md")] = (
        None
    ),
    debias: Annotated[str, typer.Option(help="geometric or arithmetic")] = "geometric",
) -> None:
    """Print belief tables; with --out, write plots and a Markdown report."""
    from belieflens.analysis.report import analyze as run

    try:
        _choice("--debias", debias, DebiasMethod)
        result = run(file, out, method=debias)  # type: ignore[arg-type]
    except BeliefLensError as e:
        _fail(str(e))
        return
    typer.echo(result.text)
    for f in result.files:
        typer.echo(f"wrote {f}")


@app.command()
def info(
    file: Annotated[Path, typer.Argument(help="cache file")],
) -> None:
    """Print a cache file's provenance, dimensions and sizes."""
    from belieflens.cache.info import describe

    try:
        typer.echo(describe(file))
    except BeliefLensError as e:
        _fail(str(e))


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
