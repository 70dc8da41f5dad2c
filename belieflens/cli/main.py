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
from belieflens.types import (
    DebiasMethod,
    DeviceName,
    DTypeName,
    KernelName,
    PaddingSide,
    StoreDTypeName,
)

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
        count = getattr(registry.get(name), "count", None)  # finite grids (revealed beliefs)
        if callable(count):
            typer.echo(f"    grid: {count()} prompts with the defaults (one episode each)")
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
    simulator: Annotated[
        str | None, typer.Option(help="model that plays the user under active engagement "
                                 "(embedded name, HF id, folder or .gguf; default: --model)")
    ] = None,
    episodes: Annotated[int, typer.Option(help="number of episodes")] = 4,
    seed: Annotated[int, typer.Option(help="random seed of the environment")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto")] = "cpu",
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16")] = "float32",
    kernels: Annotated[
        str, typer.Option(help="CPU linear kernels: auto (oneDNN on CPU if it passes a check "
                          "at load), default or onednn; recorded in provenance")
    ] = "auto",
    batch_size: Annotated[
        str, typer.Option(help="max rows per forward batch, or auto (fit a memory budget)")
    ] = "16",
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
    window: Annotated[
        int, typer.Option(hidden=True, help="queries per written window (the resume unit)")
    ] = 1024,
) -> None:
    """Run every read-out of an environment through a model and write a cache file.

    If ``OUT.partial`` holds an interrupted run of the same study, it is resumed.
    """
    from belieflens import envs as registry
    from belieflens.envs.params import parse_assignments

    try:
        _choice("--device", device, DeviceName)
        _choice("--dtype", dtype, DTypeName)
        _choice("--kernels", kernels, KernelName)
        _choice("--padding", padding, PaddingSide)
        _choice("--resid-dtype", resid_dtype, StoreDTypeName)
        _check_out(out, overwrite)
        from belieflens.cache.extract import ExtractOptions

        options = ExtractOptions(
            episodes=episodes, seed=seed, max_rows=_batch_size(batch_size), max_tokens=max_tokens,
            save_logits=save_logits, padding_side=padding,  # type: ignore[arg-type]
            resid_dtype=resid_dtype, threads=threads,  # type: ignore[arg-type]
            reuse_prefix=not no_prefix_reuse, cont_resid=cont_resid, window=window,
        )
        environment = registry.get(env, **parse_assignments(set_ or []))
        from belieflens.cache.models import resolve

        resolve(model)  # fail fast, before any heavy import or work
        if simulator is not None:
            resolve(simulator)
        from belieflens.cache.lock import write_lock

        with write_lock(out):  # a second writer is refused before the model loads
            _run_extract(environment, out, options, model, device, dtype, threads, quiet,
                         overwrite, simulator=simulator, kernels=kernels)
    except BeliefLensError as e:
        _fail(str(e))


def _batch_size(value: str) -> int:
    """``--batch-size``: a positive integer, or ``auto`` (0 internally)."""
    if value == "auto":
        return 0
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 1:
        raise ParameterError(f"option '--batch-size' = {value} is not allowed: >= 1, or auto")
    return n


def _choice(option: str, value: str, literal: Any) -> None:
    from typing import get_args

    allowed = get_args(literal)
    if value not in allowed:
        raise ParameterError(
            f"option '{option}' = {value!r} is not allowed: one of {', '.join(allowed)}"
        )


def _check_out(out: Path, overwrite: bool) -> None:
    import os

    if out.is_dir():
        raise ParameterError(f"option '--out' = '{out}' is not allowed: it is a directory")
    if out.exists() and not overwrite:
        raise ParameterError(f"{out} exists; pass --overwrite to replace it")
    folder = out.parent
    if not folder.is_dir():
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: folder {folder} does not exist"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ParameterError(
            f"option '--out' = '{out}' is not allowed: folder {folder} is not writable"
        )


def _run_extract(environment: Any, out: Path, options: Any, model: str, device: str,
                 dtype: str, threads: int, quiet: bool, overwrite: bool,
                 simulator: str | None = None, kernels: str = "auto") -> None:
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
        try:
            loaded = load(model, device=device, dtype=dtype,  # type: ignore[arg-type]
                          kernels=kernels)  # type: ignore[arg-type]
        except BeliefLensError:
            raise
        except Exception as e:  # weights or config transformers cannot read
            from belieflens.errors import ModelNotFoundError

            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ModelNotFoundError(f"model {model!r} could not be loaded: {first}") from None
    typer.echo(
        f"model {loaded.info.official_id} ({loaded.info.n_layers} layers, {loaded.info.dtype}, "
        f"{loaded.info.device}, {loaded.info.kernels} kernels, {torch.get_num_threads()} threads) "
        f"loaded in "
        f"{loaded.info.load_seconds:.1f}s", err=True,
    )
    environment, gen_attrs = _bind_generation(
        environment, loaded, simulator, device, dtype, quiet
    )
    columns = (
        TextColumn("[bold]extract"), BarColumn(), MofNCompleteColumn(),
        TextColumn("queries · {task.fields[tps]} tok/s"), TimeElapsedColumn(),
        TextColumn("ETA"), TimeRemainingColumn(),
    )
    with Progress(*columns, disable=quiet, transient=False) as bar:
        task = bar.add_task("extract", total=None, tps="-")

        def report(p: ex.Progress) -> None:
            if p.resumed and p.tokens == 0:
                typer.echo(f"resuming {out}.partial: {p.resumed} of {p.total} read-outs "
                           "already written", err=True)
            tps = f"{p.tokens / p.seconds:,.0f}" if p.seconds > 0 else "-"
            bar.update(task, completed=p.done, total=p.total, tps=tps)

        path = ex.extract(environment, loaded, out, options, on_progress=report,
                          overwrite=overwrite, extra_attrs=gen_attrs)
    typer.echo(f"wrote {path}")


def _bind_generation(environment: Any, loaded: Any, simulator: str | None, device: str,
                     dtype: str, quiet: bool) -> tuple[Any, dict[str, Any]]:
    """Bind generators on the loaded model (and the simulator model) if the env needs text."""
    from belieflens.cache.generate import bind_model
    from belieflens.cache.generation_log import (
        GenerationRecord,
        requires_generator,
        requires_simulator,
    )
    from belieflens.cache.models import load

    if not requires_generator(environment):
        return environment, {}
    sim = loaded
    if requires_simulator(environment) and simulator is not None and simulator != loaded.info.spec:
        with _QuietLibraries():
            sim = load(simulator, device=device, dtype=dtype)  # type: ignore[arg-type]
        typer.echo(f"simulator {sim.info.official_id} loaded in {sim.info.load_seconds:.1f}s",
                   err=True)
    count = [0]

    def echo(r: GenerationRecord) -> None:
        count[0] += 1
        if not quiet:
            typer.echo(f"generated {r.role} #{count[0]} ({r.tokens} tokens, {r.stop})", err=True)

    attrs: dict[str, Any] = {"generator_model": loaded.info.official_id}
    if requires_simulator(environment):
        attrs.update({"simulator_model": sim.info.official_id,
                      "simulator_spec": sim.info.spec,
                      "simulator_weights_hash": sim.info.weights_hash})
    return bind_model(environment, loaded, simulator=sim, on_record=echo), attrs


class _QuietLibraries:
    """Silence transformers' progress bars and warnings while loading."""

    def __enter__(self) -> None:
        import logging
        import os
        import warnings

        # the bridge passes the KV cache under transformers' older keyword; harmless here
        warnings.filterwarnings("ignore", message="`past_key_values` is deprecated")
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
    lens: Annotated[
        str | None, typer.Option("--lens", help="tuned:DIR, a lens from `belieflens lens train`")
    ] = None,
    no_probes: Annotated[
        bool, typer.Option("--no-probes", help="skip the per-layer linear probes")
    ] = False,
    seed: Annotated[int, typer.Option(help="seed of the probes' cross-validation folds")] = 0,
) -> None:
    """Print belief tables; with --out, write plots and a Markdown report."""
    from belieflens.analysis.report import analyze as run

    try:
        _choice("--debias", debias, DebiasMethod)
        result = run(file, out, method=debias, lens=lens,  # type: ignore[arg-type]
                     probes=not no_probes, seed=seed)
    except BeliefLensError as e:
        _fail(str(e))
        return
    typer.echo(result.text)
    for f in result.files:
        typer.echo(f"wrote {f}")


lens_app = typer.Typer(no_args_is_help=True, help="Tuned lenses: train one for a model.")
app.add_typer(lens_app, name="lens")


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
    try:
        _choice("--device", device, DeviceName)
        if threads < 0:
            raise ParameterError(f"option '--threads' = {threads} is not allowed: >= 0")
        if vocab_top < 0:
            raise ParameterError(f"option '--vocab-top' = {vocab_top} is not allowed: >= 0")
        if (out / "config.json").exists() and not overwrite:
            raise ParameterError(f"{out} holds a lens; pass --overwrite to replace it")
        from belieflens import envs as registry
        from belieflens.analysis.tuned_lens import TrainOptions
        from belieflens.cache.models import resolve

        names = [e.strip() for e in envs_.split(",") if e.strip()]
        for name in names:
            registry.describe(name)  # unknown names fail here, before loading anything
        options = TrainOptions(epochs=epochs, lr=lr, vocab_top=vocab_top or None)
        resolve(model)
        _run_lens_train(model, out, names, contexts, per_context, options, seed, device,
                        threads)
    except BeliefLensError as e:
        _fail(str(e))


def _run_lens_train(model: str, out: Path, names: list[str], contexts: int, per_context: int,
                    options: Any, seed: int, device: str, threads: int) -> None:
    import numpy as np
    import torch

    from belieflens.analysis.tuned_lens import (
        collect_positions,
        save_tuned_lens,
        train_tuned_lens,
    )
    from belieflens.cache.models import load

    if threads:
        torch.set_num_threads(threads)
    with _QuietLibraries():
        loaded = load(model, device=device)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    positions = collect_positions(loaded, rng, envs=names, seed=seed, max_contexts=contexts,
                                  per_context=per_context)
    typer.echo(f"{positions.resid.shape[0]} positions from {positions.n_contexts} contexts",
               err=True)
    result = train_tuned_lens(loaded, positions, rng, options)
    save_tuned_lens(result.lens, out)
    typer.echo("held-out KL(final || lens) per layer, nats (logit lens -> tuned lens):")
    for layer, (a, b) in enumerate(zip(result.kl_logit, result.kl_tuned, strict=True)):
        typer.echo(f"  layer {layer:>3}: {a:8.3f} -> {b:8.3f}")
    typer.echo(f"trained in {result.seconds:.1f}s; wrote {out}")


@app.command()
def info(
    file: Annotated[Path, typer.Argument(help="cache file")],
    rerun_command: Annotated[
        bool, typer.Option("--rerun-command", help="print the command that reproduces FILE")
    ] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="re-check FILE's internal consistency; exit 1 "
                           "with one line per problem")
    ] = False,
) -> None:
    """Print a cache file's provenance, dimensions and sizes."""
    from belieflens.cache import info as cache_info

    if verify:
        from belieflens.cache.verify import verify as check

        problems = check(file)
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
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
