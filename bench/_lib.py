"""What several benchmarks share: the clock they read, peak memory, the HDF5 write timer,
the random SmolLM2-shaped model, and the extraction workloads with the floor they are
measured against.

Importing this module loads nothing heavy (torch, transformers and belieflens are
imported inside the functions that need them), so a benchmark's child process can
measure its own memory from a clean start.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from belieflens.envs import Environment
    from belieflens.model.load import LoadedModel
    from belieflens.readouts.render import TokenizedQuery
    from belieflens.results import Recorder
    from belieflens.types import KernelName

# The clock --------------------------------------------------------------------------------
#
# On a machine shared with other jobs, wall times of the same work vary by 2-3x (other
# processes take the cores). The process's CPU time (``time.process_time``, all its
# threads) counts only the work this process did; with ``--threads 1`` no thread waits
# spinning for a descheduled sibling either, so ratios of CPU times stay meaningful there.
# ``--clock cpu`` in ``bench/extract.py`` and ``bench/floor_gap.py`` selects it; every time
# those scripts print is then CPU seconds.

CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
_now: list[Callable[[], float]] = [time.perf_counter]


def use_clock(name: str) -> None:
    """Read ``name`` (``wall`` or ``cpu``) from now on."""
    _now[0] = CLOCKS[name]


def now() -> float:
    """The selected clock's reading, in seconds."""
    return _now[0]()


def add_clock_options(ap: argparse.ArgumentParser) -> None:
    """Add ``--threads`` and ``--clock`` to a benchmark's parser."""
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall time, or this process's CPU time (a shared machine)")


def apply_clock(args: argparse.Namespace) -> None:
    """Set torch's thread count and the clock from the options of :func:`add_clock_options`."""
    import torch

    torch.set_num_threads(args.threads)
    use_clock(args.clock)


# Results files ----------------------------------------------------------------------------
#
# A benchmark whose numbers the docs quote takes ``--results NAME`` and then writes its table
# to ``docs/results/NAME.md`` (and ``NAME.json``) through ``belieflens.results``: the docs
# include that file, so its numbers are never retyped. Without the option nothing is written.


def add_results_option(ap: argparse.ArgumentParser) -> None:
    """Add ``--results NAME`` to a benchmark's parser."""
    ap.add_argument("--results", metavar="NAME", default=None,
                    help="write the table to docs/results/NAME.md and NAME.json (the files "
                         "the docs include)")


def start_results(args: argparse.Namespace, *, threads: int | None = None,
                  gpu: str = "none") -> Recorder | None:
    """A results recorder started now when ``--results`` was given, else ``None``.

    ``threads`` defaults to ``args.threads`` where the parser has it.
    """
    if not getattr(args, "results", None):
        return None
    from belieflens import results

    if threads is None and isinstance(getattr(args, "threads", None), int):
        threads = args.threads
    return results.start(threads=threads, gpu=gpu)


def write_line_results(recorder: Recorder | None, name: str | None, line: str, *,
                       data: dict[str, object] | None = None) -> None:
    """Write a benchmark's last line (``key=value`` figures) as a two-column results table,
    one row per figure, when ``--results`` was given; nothing otherwise.

    Example:
        ``write_line_results(rec, args.results, "ratio=1.07 tok_s=3873")`` writes the rows
        ``ratio | 1.07`` and ``tok_s | 3873``.
    """
    if recorder is None or not name:
        return
    rows = [pair.split("=", 1) for pair in line.split() if "=" in pair]
    recorder.write(name, ["figure", "value"], rows, data={"line": line, **(data or {})})


# Peak memory ------------------------------------------------------------------------------


def _status_mb(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    raise OSError(f"no {field} in /proc/self/status")


def rss_mb() -> float:
    """This process's resident set size now, in MiB (``VmRSS``)."""
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (``VmHWM``; else ``ru_maxrss``).

    ``getrusage(RUSAGE_SELF).ru_maxrss`` is inherited across ``fork`` and kept across
    ``execve`` on Linux: a benchmark's child process started after the parent grew reports
    the parent's peak when its own is lower (``bench/analysis_memory.py`` reported 744 MB
    for both of its studies this way, the parent's size after extracting them). The
    kernel's ``VmHWM`` belongs to the address space, which ``execve`` replaces, so it is the
    child's own; ``ru_maxrss`` is the fallback where ``/proc`` is missing.
    """
    try:
        return _status_mb("VmHWM")
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# HDF5 writes ------------------------------------------------------------------------------


class WriteTimer:
    """Time spent writing the HDF5 cache file during :func:`belieflens.run.lifecycle.write_cache`.

    ``with WriteTimer() as t: write_cache(...)`` then ``t.seconds``: the time inside
    ``create_partial`` (allocating the file and writing every static value),
    ``PartialFile.write_rows`` (each window, synced) and ``PartialFile.finish`` (the final
    rename), measured by wrapping those three functions while active.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self._saved: list[tuple[Any, str, Any]] = []

    def _wrap(self, owner: Any, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        self._saved.append((owner, name, original))
        setattr(owner, name, timed)

    def __enter__(self) -> WriteTimer:
        import belieflens.run.extract as extract_mod
        from belieflens.store.file import PartialFile

        self._wrap(extract_mod, "create_partial")
        self._wrap(PartialFile, "write_rows")
        self._wrap(PartialFile, "finish")
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)


# A random model of SmolLM2-135M's residual shape ------------------------------------------
#
# For benchmarks whose cost is set by the residual stream rather than the weights: a
# random Llama with 30 blocks, d_model 576 and the real tokenizer. ``narrow=True``
# shrinks the MLP and attention (1 head, MLP width 64) so that thousands of read-outs run
# in minutes on two cores (memory, checksums); ``narrow=False`` keeps the real model's
# widths (9 heads, 3 KV heads, MLP 1536), so compute per block is realistic.


def smol_shaped_hf(*, narrow: bool) -> tuple[Any, Any]:
    """The random transformers model (seeded: the same weights every run) and its tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from belieflens.model.load import resolve

    source = resolve("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)
    heads, kv_heads, mlp = (1, 1, 64) if narrow else (9, 3, 1536)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=576, intermediate_size=mlp, num_hidden_layers=30,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=64,
        max_position_embeddings=8192, tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    hf = LlamaForCausalLM(cfg)
    hf.eval()  # type: ignore[no-untyped-call]
    return hf, tok


def smol_shaped_random(*, narrow: bool, kernels: KernelName = "auto") -> LoadedModel:
    """The random model on the CPU in float32 (seeded: the same weights every run)."""
    from belieflens.model.load import ModelSource, bridge_from_hf

    hf, tok = smol_shaped_hf(narrow=narrow)
    name = "narrow-random" if narrow else "smol-shaped-random"
    src = ModelSource(name, "directory", Path("."), name)
    return bridge_from_hf(src, "cpu", "float32", hf, tok, "random", "", 0.0, kernels=kernels)


def parse_timed(ap: argparse.ArgumentParser) -> tuple[argparse.Namespace, Recorder | None]:
    """A timing benchmark's options parsed, with the clock's options and ``--results`` added,
    the clock applied and the results recorder started."""
    add_clock_options(ap)
    add_results_option(ap)
    args = ap.parse_args()
    recorder = start_results(args)
    apply_clock(args)
    return args, recorder


def intervention_bench(real: bool | str, episodes: int, **params: Any
                       ) -> tuple[LoadedModel, Any]:
    """The model of an intervention benchmark (``real``: the embedded model, or the model of
    that name; else the random one of the embedded model's full widths; default CPU kernels)
    and a coin-flip study it extracts (multi-turn delivery, seed 0, ``params``) into a
    temporary folder, read back."""
    import tempfile

    import belieflens.envs as envs
    from belieflens.interventions.readouts import read_study
    from belieflens.model.load import load
    from belieflens.run.extract import ExtractOptions
    from belieflens.run.lifecycle import write_cache

    name = real if isinstance(real, str) else "smollm2-135m"
    model = (load(name, kernels="default") if real
             else smol_shaped_random(narrow=False, kernels="default"))
    env = envs.get("coin-flip", delivery="multi-turn", **params)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_cache(env, model, Path(tmp) / "study.h5",
                           ExtractOptions(episodes=episodes, seed=0))
        return model, read_study(path)


# Extraction workloads and the compute floor -----------------------------------------------


def bench_env(name: str, turns: int, params: dict[str, str] | None = None) -> Environment:
    """``coin-flip`` (multi-turn delivery, ``turns`` turns each), or any environment with
    ``params`` (``--set NAME=VALUE``: e.g. the recommender on BayesBench's fitted world)."""
    import belieflens.envs as envs

    if name == "coin-flip":
        return envs.get("coin-flip", **{"turns": turns, "delivery": "multi-turn",
                                        **(params or {})})
    return envs.get(name, **(params or {}))


def parse_sets(items: list[str]) -> dict[str, str]:
    """``--set NAME=VALUE`` options as a dict (the CLI's form, for the bench scripts)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"error: --set wants NAME=VALUE, got {item!r}")
        out[name] = value
    return out


def queries(loaded: LoadedModel, env: Environment, episodes: int) -> list[TokenizedQuery]:
    """Every query of ``episodes`` of ``env`` (seed 0), rendered and tokenized as extracted."""
    from belieflens.readouts.render import bos_policy, render
    from belieflens.run.extract import records

    bos = bos_policy(loaded.tokenizer)
    return [render(loaded.tokenizer, r.query, bos=bos) for r in records(env, episodes, 0)]


def floor_rate(
    model: PreTrainedModel, *, rows: int = 4, width: int = 128, repeat: int = 3
) -> float:
    """Tokens per second of a plain forward on ``rows x width`` fresh tokens (best of runs)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, int(model.config.vocab_size), (rows, width), generator=gen)
    best = float("inf")
    with torch.inference_mode():
        model(ids[:, :8], logits_to_keep=1)
        for _ in range(repeat):
            t0 = now()
            model(ids, logits_to_keep=1)
            best = min(best, now() - t0)
    return rows * width / best


def sustained_rate(
    model: PreTrainedModel, tokens: int, *, rows: int = 4, width: int = 128
) -> float:
    """Tokens per second of ``rows x width`` forwards of fresh tokens, back to back, one pass
    over at least ``tokens`` tokens: :func:`floor_rate`'s shape held as long as a run."""
    import torch

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, int(model.config.vocab_size), (rows, width), generator=gen)
    calls = -(-tokens // ids.numel())
    with torch.inference_mode():
        model(ids[:, :8], logits_to_keep=1)
        t0 = now()
        for _ in range(calls):
            model(ids, logits_to_keep=1)
        seconds = now() - t0
    return calls * ids.numel() / seconds
