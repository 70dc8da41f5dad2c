"""The ``belieflens`` command line: one command, one library call.

Each command parses its options (strings into the typed option sets of
:mod:`belieflens.types`), makes one call of :mod:`belieflens.api` (or
:func:`belieflens.report.study.analyze`, :mod:`belieflens.store.info`) and prints.
Every user error (bad parameter, unknown model, unreadable file) prints one
line ``error: ...`` to stderr and exits with code 2; no traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from belieflens.api import (
    DEVICE_NAMES,
    DTYPE_NAMES,
    KERNEL_NAMES,
    PADDING_SIDES,
    STORE_DTYPE_NAMES,
    ExtractEvent,
    LensEvent,
    ModelLoaded,
    PositionsCollected,
    train_lens,
)
from belieflens.api import choice as _choice
from belieflens.api import extract as run_extract
from belieflens.cli.intervene import app as intervene_app
from belieflens.errors import BeliefLensError, ParameterError
from belieflens.heap import limit_arenas
from belieflens.run.generation_log import GenerationRecord
from belieflens.types import DEBIAS_METHODS

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

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
    from belieflens.envs.revealed.counts import counts_line

    for name in registry.names():
        doc, params = registry.describe(name)
        typer.echo(f"{name}: {doc}")
        for p in params:
            typer.echo(f"    {p.name} ({p.type}, default {p.default!r}): {p.help}")
        line = counts_line(name, registry.get(name))
        if line is not None:
            typer.echo(f"    {line}")
        typer.echo("")


@app.command()
def extract(
    env: Annotated[str, typer.Argument(help="environment name (see `belieflens envs`)")],
    out: Annotated[Path, typer.Option(
        "--out", help="cache file to write (.h5); with --cluster, a study directory")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="environment parameter NAME=VALUE")
    ] = None,
    model: Annotated[str, typer.Option(help="embedded name, HF id, folder or .gguf")] = (
        "smollm2-135m"
    ),
    simulator: Annotated[
        str | None, typer.Option(help="model that plays the user under active engagement "
                                 "(embedded name, HF id, folder or .gguf; default: --model)")
    ] = None,
    episodes: Annotated[int, typer.Option(help="number of episodes")] = 4,
    seed: Annotated[int, typer.Option(help="random seed of the environment")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto")] = "cpu",
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16")] = "float32",
    kernels: Annotated[
        str, typer.Option(help="CPU linear kernels: auto (oneDNN on a non-Intel CPU if it passes "
                          "a check at load), default or onednn; recorded in provenance")
    ] = "auto",
    batch_size: Annotated[
        str, typer.Option(help="max rows per forward batch, or auto (fit a memory budget)")
    ] = "16",
    max_tokens: Annotated[int, typer.Option(help="max padded tokens per batch")] = 8192,
    row_tokens: Annotated[
        int, typer.Option(help="pack shared-prefix edges into rows of up to N tokens under a "
                          "tree mask (fewer forward calls; 0 = one edge per row)")
    ] = 128,
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
    window: Annotated[
        int, typer.Option(help="queries per written window (the resume unit; shards are "
                          "runs of whole windows)")
    ] = 1024,
    cluster: Annotated[
        str | None, typer.Option(help="run on Dask: local[:N] (N worker processes), "
                                 "tcp://HOST:PORT or PATH/scheduler.json; --out is then a "
                                 "study directory of shard files")
    ] = None,
    shard_episodes: Annotated[
        int, typer.Option(help="with --cluster: about K episodes per shard, rounded to whole "
                          "windows (0 = about three shards per worker)")
    ] = 0,
) -> None:
    """Run every read-out of an environment through a model and write a cache file.

    If ``OUT.partial`` holds an interrupted run of the same study, it is resumed. With
    ``--cluster``, shards of the study run as Dask tasks into the study directory OUT;
    rerunning the same command resumes it.
    """
    from belieflens.episodes.params import parse_assignments

    try:
        device_ = _choice("--device", device, DEVICE_NAMES)
        dtype_ = _choice("--dtype", dtype, DTYPE_NAMES)
        kernels_ = _choice("--kernels", kernels, KERNEL_NAMES)
        padding_ = _choice("--padding", padding, PADDING_SIDES)
        resid_dtype_ = _choice("--resid-dtype", resid_dtype, STORE_DTYPE_NAMES)
        rows = _batch_size(batch_size)
        params = parse_assignments(set_ or [])
        with _ExtractReport(out, quiet) as report:
            path = run_extract(
                env, out=out, params=params, model=model, simulator=simulator,
                episodes=episodes, seed=seed, device=device_, dtype=dtype_, kernels=kernels_,
                batch_size=rows, max_tokens=max_tokens, row_tokens=row_tokens, threads=threads,
                padding=padding_,
                save_logits=save_logits, resid_dtype=resid_dtype_, cont_resid=cont_resid,
                prefix_reuse=not no_prefix_reuse, window=window, overwrite=overwrite,
                on_event=report, client=cluster, shard_episodes=shard_episodes,
            )
    except BeliefLensError as e:
        _fail(str(e))
        return
    typer.echo(f"wrote {path}")


def _batch_size(value: str) -> int | Literal["auto"]:
    """``--batch-size``: a whole number (the library checks it is >= 1), or ``auto``."""
    if value == "auto":
        return "auto"
    try:
        return int(value)
    except ValueError:
        raise ParameterError(
            f"option '--batch-size' = {value} is not allowed: >= 1, or auto"
        ) from None


class _ExtractReport:
    """What an extraction reports, on stderr: each model loaded, each text generated, and a
    progress bar started once the models are loaded (hidden with ``--quiet``)."""

    def __init__(self, out: Path, quiet: bool) -> None:
        self.out = out
        self.quiet = quiet
        self.generated = 0
        self.bar: tuple[Progress, TaskID] | None = None

    def __enter__(self) -> _ExtractReport:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar[0].stop()

    def _bar(self) -> tuple[Progress, TaskID]:
        if self.bar is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            columns = (
                TextColumn("[bold]extract"), BarColumn(), MofNCompleteColumn(),
                TextColumn("queries · {task.fields[tps]} tok/s"), TimeElapsedColumn(),
                TextColumn("ETA"), TimeRemainingColumn(),
            )
            bar = Progress(*columns, disable=self.quiet, transient=False)
            bar.start()
            self.bar = bar, bar.add_task("extract", total=None, tps="-")
        return self.bar

    def __call__(self, event: ExtractEvent) -> None:
        if isinstance(event, ModelLoaded):
            info = event.info
            if event.role == "model":
                typer.echo(
                    f"model {info.official_id} ({info.n_layers} layers, {info.dtype}, "
                    f"{info.device}, {info.kernels} kernels, {event.threads} threads) "
                    f"loaded in {info.load_seconds:.1f}s", err=True,
                )
            else:
                typer.echo(f"simulator {info.official_id} loaded in {info.load_seconds:.1f}s",
                           err=True)
            return
        bar, task = self._bar()
        if isinstance(event, GenerationRecord):
            self.generated += 1
            if not self.quiet:
                typer.echo(f"generated {event.role} #{self.generated} ({event.tokens} tokens, "
                           f"{event.stop})", err=True)
            return
        if event.resumed and event.tokens == 0:
            where = self.out if self.out.is_dir() else f"{self.out}.partial"
            typer.echo(f"resuming {where}: {event.resumed} of {event.total} "
                       "read-outs already written", err=True)
        tps = f"{event.tokens / event.seconds:,.0f}" if event.seconds > 0 else "-"
        bar.update(task, completed=event.done, total=event.total, tps=tps)


@app.command()
def analyze(
    file: Annotated[Path, typer.Argument(help="cache file written by `belieflens extract`")],
    out: Annotated[Path | None, typer.Option("--out", help="folder for PNGs and report.md")] = (
        None
    ),
    debias: Annotated[str, typer.Option(help="geometric or arithmetic")] = "geometric",
    lens: Annotated[
        str | None, typer.Option("--lens", help="tuned:DIR, a lens from `belieflens lens train`")
    ] = None,
    no_probes: Annotated[
        bool, typer.Option("--no-probes", help="skip the per-layer linear probes")
    ] = False,
    seed: Annotated[int, typer.Option(help="seed of the probes' cross-validation folds")] = 0,
    cluster: Annotated[
        str | None, typer.Option(help="run the dask work on a cluster: local[:N], "
                                 "tcp://HOST:PORT or PATH/scheduler.json")
    ] = None,
    no_html: Annotated[
        bool, typer.Option("--no-html", help="with --out, skip the interactive page study.html")
    ] = False,
) -> None:
    """Print belief tables; with --out, write plots, a Markdown report and study.html."""
    from belieflens.api import analyze as run

    try:
        result = run(file, out, debias=_choice("--debias", debias, DEBIAS_METHODS), lens=lens,
                     probes=not no_probes, seed=seed, cluster=cluster, html=not no_html)
    except BeliefLensError as e:
        _fail(str(e))
        return
    typer.echo(result.text)
    for f in result.files:
        typer.echo(f"wrote {f}")


@app.command()
def compare(
    files: Annotated[list[Path], typer.Argument(
        help="cache files (or study directories) of one study from different models")],
    out: Annotated[Path | None, typer.Option(
        "--out", help="folder for the figures, compare.md and compare.nc")] = None,
    debias: Annotated[str, typer.Option(help="geometric or arithmetic")] = "geometric",
    no_probes: Annotated[
        bool, typer.Option("--no-probes", help="skip the per-layer linear probes")
    ] = False,
    seed: Annotated[int, typer.Option(help="seed of the probes' cross-validation folds")] = 0,
) -> None:
    """Compare models on one study, layers aligned by relative depth: tables to stdout; with
    --out, figures, a Markdown report and the Dataset (compare.nc)."""
    from belieflens.report.compare import compare_report

    try:
        result = compare_report(files, out, method=_choice("--debias", debias, DEBIAS_METHODS),
                                probes=not no_probes, seed=seed)
    except BeliefLensError as e:
        _fail(str(e))
        return
    typer.echo(result.text)
    for f in result.files:
        typer.echo(f"wrote {f}")


@app.command()
def models() -> None:
    """List the embedded model names: size, layers, installed or not (and how to install)."""
    from belieflens.model.load import catalogue

    rows = catalogue()
    typer.echo(f"{'name':<20} {'blocks':>6} {'GGUF':>9}  {'installed':<10} {'weights cached':<15}"
               " model")
    for m in rows:
        installed = "yes" if m.installed else "no"
        cached = "yes" if m.weights_cached else "no (first load)" if m.installed else "-"
        typer.echo(f"{m.name:<20} {m.layers:>6} {m.size / 1e6:>6.0f} MB  {installed:<10} "
                   f"{cached:<15} {m.official_id}")
    missing = [m for m in rows if not m.installed]
    if missing:
        typer.echo("")
        for m in missing:
            typer.echo(f"install {m.name}: {m.install}")


lens_app = typer.Typer(no_args_is_help=True, help="Tuned lenses: train one for a model.")
app.add_typer(lens_app, name="lens")
app.add_typer(intervene_app, name="intervene")


@lens_app.command("train")
def lens_train(
    out: Annotated[Path, typer.Option("--out", help="folder to write the lens into")],
    model: Annotated[str, typer.Option(help="embedded name, HF id, folder or .gguf")] = (
        "smollm2-135m"
    ),
    envs_: Annotated[
        str, typer.Option("--envs", help="comma-separated environments supplying contexts")
    ] = "coin-flip,dice,coins,preference,recommender,medical-triage",
    contexts: Annotated[int, typer.Option(help="contexts to run")] = 32,
    per_context: Annotated[int, typer.Option(help="token positions sampled per context")] = 16,
    epochs: Annotated[int, typer.Option(help="passes over the training positions")] = 4,
    lr: Annotated[float, typer.Option(help="Adam learning rate")] = 2e-3,
    vocab_top: Annotated[
        int, typer.Option(help="train on the union of each position's top-N final tokens "
                          "(0 = full vocabulary, slower)")
    ] = 256,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto")] = "cpu",
    threads: Annotated[int, typer.Option(help="CPU threads (0 = torch default)")] = 0,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing lens")] = (
        False
    ),
) -> None:
    """Train a tuned lens on contexts the environments generate and save it to --out."""
    def report(event: LensEvent) -> None:
        if isinstance(event, PositionsCollected):
            typer.echo(f"{event.positions} positions from {event.contexts} contexts", err=True)

    try:
        result = train_lens(
            out, model=model, envs=[e.strip() for e in envs_.split(",") if e.strip()],
            contexts=contexts, per_context=per_context, epochs=epochs, lr=lr,
            vocab_top=vocab_top, seed=seed, device=_choice("--device", device, DEVICE_NAMES),
            threads=threads, overwrite=overwrite, on_event=report,
        )
    except BeliefLensError as e:
        _fail(str(e))
        return
    typer.echo("held-out KL(final || lens) per layer, nats (logit lens -> tuned lens):")
    for layer, (a, b) in enumerate(zip(result.kl_logit, result.kl_tuned, strict=True)):
        typer.echo(f"  layer {layer:>3}: {a:8.3f} -> {b:8.3f}")
    typer.echo(f"trained in {result.seconds:.1f}s; wrote {out}")


@app.command()
def merge(
    directory: Annotated[Path, typer.Argument(help="study directory (extract --cluster)")],
    out: Annotated[Path, typer.Argument(help="cache file to write (.h5)")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing file")] = (
        False
    ),
) -> None:
    """Write the single cache file one process would have written from a study directory."""
    from belieflens.store.study import merge as run

    try:
        path = run(directory, out, overwrite=overwrite)
    except BeliefLensError as e:
        _fail(str(e))
        return
    typer.echo(f"wrote {path}")


@app.command()
def info(
    file: Annotated[Path, typer.Argument(help="cache file")],
    rerun_command: Annotated[
        bool, typer.Option("--rerun-command", help="print the command that reproduces FILE")
    ] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="read every chunk against its checksum (damage: "
                           "exit 2) and re-check FILE's internal consistency (exit 1 "
                           "with one line per problem)")
    ] = False,
) -> None:
    """Print a cache file's provenance, dimensions and sizes."""
    from belieflens.store import info as cache_info
    if verify:
        from belieflens.store.verify import verify as check

        try:
            problems = check(file)
        except BeliefLensError as e:  # damaged chunks: one line, exit 2
            _fail(str(e))
            return
        for line in problems:
            typer.echo(f"problem: {line}")
        if problems:
            raise typer.Exit(1)
        typer.echo(f"ok: {file} passed every consistency check")
        if not rerun_command:
            return
    try:
        if rerun_command:
            typer.echo(cache_info.rerun_command(file))
        else:
            typer.echo(cache_info.describe(file))
    except BeliefLensError as e:
        _fail(str(e))


def main() -> None:
    """Console entry point (caps malloc arenas first: see :mod:`belieflens.heap`)."""
    limit_arenas()
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
