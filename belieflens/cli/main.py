"""The ``belieflens`` command line: one command, one library call.

Each command parses its options, makes one call of the facade (:mod:`belieflens.api`, the only
part of the package the CLI imports besides :mod:`belieflens.errors` and
:mod:`belieflens.types`) and prints. The library checks every option, once; every user error
(bad parameter, unknown model, unreadable file) prints one line ``error: ...`` to stderr and
exits with code 2; no traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from belieflens import api
from belieflens.api import (
    DEFAULT_MODEL,
    Analysis,
    ExtractEvent,
    GenerationRecord,
    LensEvent,
    ModelLoaded,
    PositionsCollected,
    environments,
    limit_arenas,
    parse_assignments,
)
from belieflens.cli.intervene import app as intervene_app
from belieflens.cli.options import (
    Debias,
    DecoderSeed,
    Device,
    Model,
    NoDecoders,
    NoProbes,
    Overwrite,
    Threads,
    one_line_errors,
    one_line_summaries,
    skip_decoders,
    wrote,
)
from belieflens.types import DTypeName, KernelName, PaddingSide, StoreDTypeName

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="What a language model believes, turn by turn and layer by layer.",
)


@app.command()
def envs() -> None:
    """List environments with their parameters, types and defaults."""
    for env in environments():
        typer.echo(f"{env.name}: {env.doc}")
        for p in env.params:
            typer.echo(f"    {p.name} ({p.type}, default {p.default!r}): {p.help}")
        if env.counts is not None:
            typer.echo(f"    {env.counts}")
        typer.echo("")


EnvName = Annotated[str, typer.Argument(help="environment name (see `belieflens envs`)")]
CacheOut = Annotated[Path, typer.Option(
    "--out", help="cache file to write (.h5); with --cluster, a study directory")]
Assignments = Annotated[
    list[str] | None, typer.Option("--set", help="environment parameter NAME=VALUE")]
Simulator = Annotated[str | None, typer.Option(
    help="model that plays the user under active engagement (embedded name, HF id, folder or "
    ".gguf; default: --model)")]
Episodes = Annotated[int, typer.Option(help="number of episodes")]
Seed = Annotated[int, typer.Option(help="random seed of the environment")]
DType = Annotated[DTypeName, typer.Option(parser=str, help="float32, bfloat16 or float16")]
Kernels = Annotated[KernelName, typer.Option(
    parser=str, help="CPU linear kernels: auto (oneDNN on a non-Intel CPU if it passes a check "
    "at load), default or onednn; recorded in provenance")]
BatchRows = Annotated[str, typer.Option(
    help="max rows per forward batch, or auto (fit a memory budget)")]
MaxTokens = Annotated[int, typer.Option(help="max padded tokens per batch")]
GenBatch = Annotated[str, typer.Option(
    help="max rows per generation batch and episodes generating at once (1 = one text at a "
    "time), or auto (as many as fit --max-memory, up to 64)")]
MaxMemory = Annotated[str, typer.Option(
    help="memory budget besides the weights, a size such as 1.5GB, 800MiB or 2G (auto: a "
    "quarter of the machine's memory); shared-prefix caches beyond it are evicted and "
    "recomputed")]
RowTokens = Annotated[int, typer.Option(
    help="pack shared-prefix edges into rows of up to N tokens under a tree mask (fewer "
    "forward calls; 0 = one edge per row)")]
Padding = Annotated[PaddingSide, typer.Option(parser=str, help="padding side: right or left")]
SaveLogits = Annotated[bool, typer.Option(
    "--save-logits", help="also store full next-token log-probs")]
ResidDType = Annotated[StoreDTypeName, typer.Option(
    parser=str, help="residual storage dtype: float32 or float16 (lossy)")]
NoBar = Annotated[bool, typer.Option("--quiet", help="no progress bar")]
ContResid = Annotated[bool, typer.Option(
    "--cont-resid", help="store residuals at multi-token continuation positions (for the "
    "multi-token lens; large)")]
NoPrefixReuse = Annotated[bool, typer.Option(
    "--no-prefix-reuse", help="run every query on its full prompt")]
Window = Annotated[int, typer.Option(
    help="queries per written window (the resume unit; shards are runs of whole windows)")]
ExtractCluster = Annotated[str | None, typer.Option(
    help="run on Dask: local[:N] (N worker processes), tcp://HOST:PORT or "
    "PATH/scheduler.json; --out is then a study directory of shard files")]
ShardEpisodes = Annotated[int, typer.Option(
    help="with --cluster: about K episodes per shard, rounded to whole windows (0 = about "
    "three shards per worker)")]
InitOption = Annotated[str, typer.Option(
    "--init", help="the model's weights: trained (default), random:SEED (an untrained "
    "control: the architecture's own initialisation, seeded) or shuffled:SEED (each trained "
    "tensor's entries permuted); recorded in provenance")]
CheckpointSeconds = Annotated[float, typer.Option(
    help="save finished read-outs at least every N seconds of compute, at batch boundaries "
    "(a kill loses at most that; 0 = after every batch)")]


@app.command()
def extract(
    env: EnvName,
    out: CacheOut,
    set_: Assignments = None,
    model: Model = DEFAULT_MODEL,
    simulator: Simulator = None,
    episodes: Episodes = 4,
    seed: Seed = 0,
    device: Device = "cpu",
    dtype: DType = "float32",
    kernels: Kernels = "auto",
    batch_size: BatchRows = "16",
    max_tokens: MaxTokens = 8192,
    max_memory: MaxMemory = "auto",
    gen_batch: GenBatch = "auto",
    row_tokens: RowTokens = 128,
    threads: Threads = 0,
    padding: Padding = "right",
    save_logits: SaveLogits = False,
    resid_dtype: ResidDType = "float32",
    overwrite: Overwrite = False,
    quiet: NoBar = False,
    cont_resid: ContResid = False,
    no_prefix_reuse: NoPrefixReuse = False,
    window: Window = 1024,
    cluster: ExtractCluster = None,
    shard_episodes: ShardEpisodes = 0,
    checkpoint_seconds: CheckpointSeconds = 60.0,
    init: InitOption = "trained",
) -> None:
    """Run every read-out of an environment through a model and write a cache file.

    If ``OUT.partial`` holds an interrupted run of the same study, it is resumed. With
    ``--cluster``, shards of the study run as Dask tasks into the study directory OUT;
    rerunning the same command resumes it. Ctrl-C or SIGTERM saves what is finished and
    exits with 130 or 143; a full disk keeps it too (exit 2).
    """
    with one_line_errors():
        params = parse_assignments(set_ or [])
        with _ExtractReport(out, quiet) as report:
            path = api.extract(
                env, out=out, params=params, on_event=report,
                model=model, simulator=simulator, device=device, dtype=dtype, kernels=kernels,
                init=init, overwrite=overwrite, client=cluster, shard_episodes=shard_episodes,
                checkpoint_seconds=checkpoint_seconds, episodes=episodes, seed=seed,
                batch_size=batch_size, max_tokens=max_tokens, max_memory=max_memory,
                gen_batch=gen_batch, row_tokens=row_tokens, threads=threads, padding=padding,
                save_logits=save_logits, resid_dtype=resid_dtype, cont_resid=cont_resid,
                prefix_reuse=not no_prefix_reuse, window=window,
            )
    wrote(path)


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
            from rich import progress as rp

            columns = (
                rp.TextColumn("[bold]extract"), rp.BarColumn(), rp.MofNCompleteColumn(),
                rp.TextColumn("queries · {task.fields[tps]} tok/s"), rp.TimeElapsedColumn(),
                rp.TextColumn("ETA"), rp.TimeRemainingColumn(),
            )
            bar = rp.Progress(*columns, disable=self.quiet, transient=False)
            bar.start()
            self.bar = bar, bar.add_task("extract", total=None, tps="-")
        return self.bar

    def __call__(self, event: ExtractEvent) -> None:
        if isinstance(event, ModelLoaded):
            info = event.info
            if event.role == "model":
                untrained = "" if info.init == "trained" else (
                    f" as {info.init}:{info.init_seed}")
                typer.echo(
                    f"model {info.official_id}{untrained} ({info.n_layers} layers, {info.dtype}, "
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


def _print(result: Analysis) -> None:
    """An analysis's text, then each file it wrote."""
    typer.echo(result.text)
    for f in result.files:
        wrote(f)


@app.command()
def analyze(
    file: Annotated[Path, typer.Argument(help="cache file written by `belieflens extract`")],
    out: Annotated[Path | None, typer.Option("--out", help="folder for PNGs and report.md")] = (
        None
    ),
    debias: Debias = "geometric",
    lens: Annotated[
        str | None, typer.Option("--lens", help="tuned:DIR, a lens from `belieflens lens train`")
    ] = None,
    no_decoders: NoDecoders = False,
    no_probes: NoProbes = False,
    seed: DecoderSeed = 0,
    cluster: Annotated[
        str | None, typer.Option(help="run the dask work on a cluster: local[:N], "
                                 "tcp://HOST:PORT or PATH/scheduler.json")
    ] = None,
    no_html: Annotated[bool, typer.Option(
        "--no-html", help="with --out, skip the interactive page study.html")] = False,
    floor: Annotated[list[Path] | None, typer.Option(
        "--floor", help="a control file of the same study (extract --init random:SEED); "
        "repeat for several seeds: every read-out beside its floor")] = None,
    transfer: Annotated[list[Path] | None, typer.Option(
        "--transfer", help="a cache file of another condition of the study (another "
        "parameter, the same seed): the decoders fitted on the study, scored on it; repeat "
        "for several")] = None,
    transfer_floor: Annotated[list[Path] | None, typer.Option(
        "--transfer-floor", help="an untrained control of a --transfer file, paired with "
        "the --floor control of the same network; repeat")] = None,
    transfer_delivery: Annotated[str | None, typer.Option(
        "--transfer-delivery", metavar="FROM:TO", help="the deliveries of a transfer's two "
        "sides; without --transfer, from one delivery of the study to the other, e.g. "
        "multi-turn:single-turn")] = None,
    own_answer: Annotated[bool, typer.Option(
        "--own-answer", help="decode the model's own answer from each layer (beside the "
        "statistic baselines and, with --floor, the untrained floor)")] = False,
    results: Annotated[str | None, typer.Option(
        "--results", metavar="NAME", help="also write the comparisons beside --floor as "
        "docs/results/NAME.md and .json")] = None,
) -> None:
    """Print belief tables; with --out, write plots, a Markdown report and study.html."""
    with one_line_errors():
        decoders = not skip_decoders(no_decoders, no_probes)
        result = api.analyze(file, out, debias=debias, lens=lens, decoders=decoders,
                             seed=seed, client=cluster, html=not no_html, floors=floor or [],
                             transfers=transfer or [], transfer_floors=transfer_floor or [],
                             transfer_delivery=transfer_delivery, own_answer=own_answer,
                             results=results)
    _print(result)


@app.command()
def compare(
    files: Annotated[list[Path], typer.Argument(
        help="cache files (or study directories) of one study from different models")],
    out: Annotated[Path | None, typer.Option(
        "--out", help="folder for the figures, compare.md and compare.nc")] = None,
    debias: Debias = "geometric",
    no_decoders: NoDecoders = False,
    no_probes: NoProbes = False,
    seed: DecoderSeed = 0,
) -> None:
    """Compare models on one study, layers aligned by relative depth: tables to stdout; with
    --out, figures, a Markdown report and the Dataset (compare.nc)."""
    with one_line_errors():
        decoders = not skip_decoders(no_decoders, no_probes)
        result = api.compare_report(files, out, debias=debias, decoders=decoders, seed=seed)
    _print(result)


@app.command()
def teach(
    env: EnvName,
    out: Annotated[Path, typer.Option("--out", help="the adapter folder to write (itself a "
                                      "--model afterwards)")],
    set_: Assignments = None,
    model: Model = DEFAULT_MODEL,
    episodes: Annotated[int, typer.Option(help="training episodes (seeds disjoint from any "
                                          "evaluation seed)")] = 32,
    seed: Annotated[int, typer.Option(help="seeds the training episodes, the adapters and "
                                      "the order of steps")] = 0,
    steps: Annotated[int, typer.Option(help="optimiser steps")] = 300,
    batch: Annotated[int, typer.Option(help="read-out trees per step (one episode, "
                                       "delivery and turn each)")] = 4,
    rank: Annotated[int, typer.Option(help="LoRA rank (scale alpha = 2 x rank)")] = 8,
    layers: Annotated[str, typer.Option(help="adapted blocks, e.g. 22-29 or 3,5,7 (default: "
                                        "the last quarter)")] = "",
    lr: Annotated[float, typer.Option(help="Adam learning rate")] = 1e-3,
    temper: Annotated[str, typer.Option(help="weight S > 0 of the evidence in the target "
                                        "(1: the oracle; coin flip: Beta(a0 + S*h, "
                                        "b0 + S*(n - h)))")] = "1",
    weigh: Annotated[str, typer.Option(help="each read-out's weight in the loss: readout "
                                       "(1 each) or question (each belief question of a "
                                       "tree the same, however many rotations)")] = "readout",
    threads: Threads = 0,
    checkpoint_seconds: Annotated[float, typer.Option(
        help="save a checkpoint at least every N seconds of training")] = 300.0,
    mix: Annotated[list[str] | None, typer.Option(
        "--mix", help="a condition taught beside the others: 'NAME=VALUE NAME=VALUE' over "
        "--set (repeat for each; --episodes of each)")] = None,
    quiet: NoBar = False,
) -> None:
    """Teach a model an environment's oracle with LoRA: its option distribution at every
    read-out of the training episodes is fitted to the (tempered) oracle by KL.

    Ctrl-C or SIGTERM saves a checkpoint (exit 130 or 143); the same command resumes.
    """
    def report(p: api.TeachProgress) -> None:
        if not quiet and (p.step % 10 == 0 or p.step == p.steps or p.step == 1):
            typer.echo(f"step {p.step}/{p.steps}  KL {p.loss:.4f}  {p.seconds:.0f} s",
                       err=True)

    with one_line_errors():
        result = api.teach(
            env, out=out, params=parse_assignments(set_ or []), model=model,
            episodes=episodes, seed=seed, steps=steps, batch=batch, rank=rank, layers=layers,
            lr=lr, temper=temper, weigh=weigh, threads=threads,
            checkpoint_seconds=checkpoint_seconds, on_step=report,
            mix=[parse_assignments(m.split()) for m in mix or []])
    tr = result.info["training"]
    typer.echo(f"final KL {tr['final_loss']:.4f} after {tr['steps']} steps; {tr['cpu_seconds']} "
               f"s CPU, peak memory {tr['peak_rss_mb']:.0f} MB")
    wrote(result.path)


@app.command()
def gates(
    file: Annotated[Path, typer.Argument(help="the gate file (TOML), committed in git")],
    out: Annotated[Path, typer.Option("--out", help="folder of its studies, measures.nc and "
                                      "verdicts.json (files there are reused)")],
    threads: Annotated[int, typer.Option(help="torch CPU threads")] = 1,
    results: Annotated[str | None, typer.Option(
        "--results", metavar="NAME", help="also write docs/results/NAME.md (the measures) and "
        "NAME-verdicts.md")] = None,
    quiet: NoBar = False,
) -> None:
    """Run a pre-registered gate file: every model on every held-out condition, the read-outs a
    taught model saw left out; print the measures and each verdict (exit 1 if a gate is not
    met)."""
    def progress(what: str) -> None:
        if not quiet:
            typer.echo(f"reading {what}", err=True)

    with one_line_errors():
        run = api.gates(file, out=out, threads=threads, on_progress=progress, results=results)
    typer.echo(run.table())
    if not run.met:
        raise typer.Exit(1)


@app.command()
def power(
    pair: Annotated[list[str], typer.Option(
        "--pair", help="a known pair: 'POSITIVE.h5 REFERENCE.h5 ...', the study of the "
        "network known to hold the belief (a trained toy, a taught adapter), then its "
        "references' (untrained networks of its shape, or the adapter's base); repeat")],
    out: Annotated[Path, typer.Option("--out", help="folder of the intervention results "
                                      "(files there are reused) and power.nc")],
    tests: Annotated[str | None, typer.Option(
        help="comma-separated tests (default: all; geometry names every target)")] = None,
    layers: Annotated[str | None, typer.Option(
        help="layers the interventions edit, e.g. 0,4,10-12 (default: all)")] = None,
    turn: Annotated[list[int] | None, typer.Option(
        "--turn", help="interventions only on read-outs at this turn")] = None,
    probe: Annotated[list[str] | None, typer.Option(
        "--probe", help="interventions only on this probe question")] = None,
    delivery: Annotated[list[str] | None, typer.Option(
        "--delivery", help="interventions only on this delivery")] = None,
    steps: Annotated[int, typer.Option(help="interchange: optimiser steps per subspace")] = 200,
    debias: Debias = "geometric",
    seed: Annotated[int, typer.Option(help="seed of the folds, the interventions and the "
                                      "bootstrap")] = 0,
    results: Annotated[str | None, typer.Option(
        "--results", metavar="NAME", help="also write docs/results/NAME.md and .json")] = None,
    record: Annotated[bool, typer.Option(
        "--record", help="also update the shipped power record that the reports' marks "
        "read")] = False,
    quiet: NoBar = False,
) -> None:
    """Run every internal test on known pairs and report its power: whether it separates the
    network known to hold the belief from its references, with intervals corrected across
    layers."""
    from belieflens.cli.intervene import parse_layers

    def progress(what: str) -> None:
        if not quiet:
            typer.echo(f"running {what}", err=True)

    with one_line_errors():
        run = api.power(
            [p.split() for p in pair], out,
            tests=[t.strip() for t in tests.split(",") if t.strip()] if tests else None,
            layers=parse_layers(layers), select=api.Selection(
                turns=tuple(turn) if turn else None, probes=tuple(probe) if probe else None,
                deliveries=tuple(delivery) if delivery else None),
            steps=steps, debias=debias, seed=seed, results=results, record=record,
            on_progress=progress)
    typer.echo(run.text)
    for f in run.files:
        wrote(f)


@app.command()
def models() -> None:
    """List the named models (embedded, taught adapters and toys: size, layers, installed or
    not, how to install) and the other kinds of value --model takes."""
    rows = api.models()
    typer.echo(f"{'name':<22} {'kind':<9} {'blocks':>6} {'weights':>9}  {'installed':<10} "
               f"{'weights cached':<15} model")
    for m in rows:
        installed = "yes" if m.installed else "no"
        cached = ("-" if m.kind == "toy" or not m.installed else
                  "yes" if m.weights_cached else "no (first load)")
        typer.echo(f"{m.name:<22} {m.kind:<9} {m.layers:>6} {m.size / 1e6:>6.1f} MB  "
                   f"{installed:<10} {cached:<15} "
                   f"{m.official_id if m.kind == 'embedded' else m.description}")
    missing = [m for m in rows if not m.installed]
    if missing:
        typer.echo("")
        for m in missing:
            typer.echo(f"install {m.name}: {m.install}")
    typer.echo("\n--model takes a name above, or:")
    for kind, (spec, what) in api.MODEL_KINDS.items():
        if spec != "NAME":
            typer.echo(f"  {spec:<12} {kind:<10} {what}")


lens_app = typer.Typer(no_args_is_help=True, help="Tuned lenses: train one for a model.")
app.add_typer(lens_app, name="lens")
app.add_typer(intervene_app, name="intervene")


@lens_app.command("train")
def lens_train(
    out: Annotated[Path, typer.Option("--out", help="folder to write the lens into")],
    model: Model = DEFAULT_MODEL,
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
    device: Device = "cpu",
    threads: Threads = 0,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing lens")] = (
        False
    ),
) -> None:
    """Train a tuned lens on contexts the environments generate and save it to --out."""
    def report(event: LensEvent) -> None:
        if isinstance(event, PositionsCollected):
            typer.echo(f"{event.positions} positions from {event.contexts} contexts", err=True)

    with one_line_errors():
        result = api.train_lens(
            out, model=model, envs=[e.strip() for e in envs_.split(",") if e.strip()],
            contexts=contexts, per_context=per_context, epochs=epochs, lr=lr,
            vocab_top=vocab_top, seed=seed, device=device, threads=threads,
            overwrite=overwrite, on_event=report,
        )
    typer.echo("held-out KL(final || lens) per layer, nats (logit lens -> tuned lens):")
    for layer, (a, b) in enumerate(zip(result.kl_logit, result.kl_tuned, strict=True)):
        typer.echo(f"  layer {layer:>3}: {a:8.3f} -> {b:8.3f}")
    typer.echo(f"trained in {result.seconds:.1f}s; wrote {out}")


@app.command()
def merge(
    directory: Annotated[Path, typer.Argument(help="study directory (extract --cluster)")],
    out: Annotated[Path, typer.Argument(help="cache file to write (.h5)")],
    overwrite: Overwrite = False,
) -> None:
    """Write the single cache file one process would have written from a study directory."""
    with one_line_errors():
        path = api.merge(directory, out, overwrite=overwrite)
    wrote(path)


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
    if verify:
        with one_line_errors():  # damaged chunks: one line, exit 2
            problems = api.verify(file)
        for line in problems:
            typer.echo(f"problem: {line}")
        if problems:
            raise typer.Exit(1)
        typer.echo(f"ok: {file} passed every consistency check")
        if not rerun_command:
            return
    with one_line_errors():
        typer.echo(api.rerun_command(file) if rerun_command else api.info(file))

one_line_summaries(app, lens_app, intervene_app)


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
