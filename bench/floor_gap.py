"""Where extraction's distance from the compute floor comes from, each part measured apart.

``bench/extract.py``'s ratio (a)/(f) sets extraction's sustained run against the floor
(f): the best of three 512-token forwards of the plain transformers model on fresh
tokens, a peak. This script runs, in rotating order, ``--rounds`` times each:

- ``peak``: the floor as ``bench/extract.py`` measures it (best of ``--floor-repeat``
  forwards of 4 x 128 fresh tokens), as a rate;
- ``sustained``: the same 4 x 128 forward run back to back over as many tokens as the
  extraction computes (one pass, no best-of): the model's best throughput held for as
  long as the extraction runs;
- ``shapes``: the plain model on exactly the extraction's forward calls -- the same
  batch sizes and widths, padding included (from :func:`belieflens.run.trie.pack` and
  :func:`belieflens.run.trie.schedule_rows`, as the runner plans them) -- on fresh
  tokens, causal, without the calls' cached past: what the model itself costs for the
  call shapes extraction picks;
- ``past``: the same calls, each over a cached past as long as the call's (a zero-filled
  ``DynamicCache``, built outside the timing; attention costs the same whatever the
  values): what the model itself costs for the workload's tokens, which attend over their
  conversation, where the floor's tokens see at most 127 others;
- ``extract``: :func:`belieflens.run.trie_runner.run_trie` over the workload, in the
  extraction's windows, with its defaults.

So ``extract/peak`` (extract.py's ratio) = ``sustained/peak`` (the floor's peak over the
same work held) x ``shapes/sustained`` (the call shapes and padding) x ``past/shapes``
(attention over the cached past) x ``extract/past`` (everything the runner adds: the
tree mask's masked pairs, building and cutting caches, hooks, unembedding the read
positions, planning).
Every rate is over the tokens the runner computes (its windows' trees); where windows cut
shared prefixes that is more than the workload's unique tokens, over which
``bench/extract.py`` counts the floor: ``windows_vs_unique`` is that factor, so
extract.py's ratio is about ``windows_vs_unique x extract_vs_peak``.
Last line: ``extract_vs_peak=... sustained_vs_peak=... shapes_vs_sustained=...
past_vs_shapes=... extract_vs_past=... past_vs_peak=... extract_vs_sustained=...
windows_vs_unique=...`` (medians of per-round ratios; ``past_vs_peak``: the plain model's
own time for extraction's calls over the peak floor, the least a runner adding nothing
would take).
Run: ``.venv/bin/python -m bench.floor_gap [--env choice --episodes 15] [--threads 1
--clock cpu]``; the default is the coin flip, 4 episodes of 6 turns, 2 threads, wall clock.
The long-context workload is the recommender on BayesBench's fitted world:
``--env recommender --set world=../shared/peers/bayesbench/recommender --set delivery=all
--episodes 1 --max-queries 120``: its first read-outs, of about 2,500 tokens each (the
default deliveries add the model's own replies, which need generation, so are left out).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from belieflens.model.load import LoadedModel, load
from belieflens.readouts.render import TokenizedQuery
from belieflens.run.extract import ExtractOptions
from belieflens.run.resume import windows
from belieflens.run.rows import forward_rows
from belieflens.run.trie import build, pack, schedule_rows
from belieflens.run.trie_runner import ROW_TOKENS, run_trie
from bench._lib import (
    add_clock_options,
    add_results_option,
    apply_clock,
    bench_env,
    floor_rate,
    now,
    parse_sets,
    queries,
    start_results,
    sustained_rate,
    write_line_results,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def run_windows(model: LoadedModel, tqs: list[TokenizedQuery], window: int) -> float:
    """Seconds of :func:`run_trie` over ``tqs`` window by window, with extraction's defaults."""
    opts = ExtractOptions()
    t0 = now()
    for a, b in windows(len(tqs), window):
        for _ in run_trie(model, tqs[a:b], max_rows=opts.max_rows, max_tokens=opts.max_tokens):
            pass
    return now() - t0


def unique_tokens(tqs: list[TokenizedQuery], window: int) -> int:
    """Tokens of the windows' radix trees: what the runner computes."""
    return sum(build([r.ids for r in forward_rows(tqs[a:b])]).tokens
               for a, b in windows(len(tqs), window))


def call_shapes(tqs: list[TokenizedQuery], window: int) -> list[tuple[int, int, int]]:
    """``(rows, width, past)`` of every forward call the runner makes, window by window."""
    opts = ExtractOptions()
    shapes: list[tuple[int, int, int]] = []
    for a, b in windows(len(tqs), window):
        trie = build([r.ids for r in forward_rows(tqs[a:b])])
        rows = pack(trie, ROW_TOKENS)
        for call in schedule_rows(trie, rows, max_rows=opts.max_rows, max_tokens=opts.max_tokens):
            shapes.append((len(call), max(rows[r].length for r in call),
                           max(trie.edges[rows[r].root].start for r in call)))
    return shapes


def zero_past(plain: torch.nn.Module, rows: int, past: int) -> Any:
    """A ``DynamicCache`` of ``past`` zero positions for ``rows`` rows of the plain model."""
    from transformers import DynamicCache

    cfg: Any = plain.config
    heads = int(getattr(cfg, "num_key_value_heads", cfg.num_attention_heads))
    dim = int(getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads))
    shape = (rows, heads, past, dim)
    return DynamicCache(ddp_cache_data=[(torch.zeros(shape), torch.zeros(shape))
                                        for _ in range(int(cfg.num_hidden_layers))])


def timed_forwards(plain: torch.nn.Module, batches: list[torch.Tensor],
                   pasts: list[int] | None = None) -> float:
    """Seconds of the plain model's forward over ``batches``, one call each; with ``pasts``
    each call runs over a zero cache of that many positions (built outside the timing)."""
    seconds = 0.0
    with torch.inference_mode():
        for i, ids in enumerate(batches):
            kwargs: dict[str, Any] = {"logits_to_keep": 1}
            if pasts is not None and pasts[i] > 0:
                kwargs["past_key_values"] = zero_past(plain, ids.shape[0], pasts[i])
            t0 = now()
            plain(ids, **kwargs)
            seconds += now() - t0
            del kwargs  # this call's cache goes before the next one's is built
    return seconds


def breakdown(model: LoadedModel, plain: PreTrainedModel, tqs: list[TokenizedQuery], *,
              label: str, rounds: int = 3, floor_repeat: int = 3) -> dict[str, float]:
    """The five measurements over ``tqs``, ``rounds`` times in rotating order; the ratios
    (medians of per-round ratios) by name, each printed as it is measured."""
    window = ExtractOptions().window
    computed = unique_tokens(tqs, window)
    unique = build([r.ids for r in forward_rows(tqs)]).tokens
    shapes = call_shapes(tqs, window)
    slots = sum(n * w for n, w, _ in shapes)
    gen = torch.Generator().manual_seed(0)
    vocab = int(plain.config.vocab_size)
    fresh = [torch.randint(0, vocab, (n, w), generator=gen) for n, w, _ in shapes]
    pasts = [p for _, _, p in shapes]
    print(f"workload ({label}): {len(tqs)} queries, {computed} tokens computed in "
          f"{len(shapes)} calls of {slots} token slots (padding "
          f"{100 * (1 - computed / slots):.1f}%, longest past {max(pasts)}); "
          f"kernels={model.info.kernels} threads={torch.get_num_threads()}", flush=True)
    steps: dict[str, Callable[[], float]] = {
        "peak": lambda: floor_rate(plain, repeat=floor_repeat),
        "sustained": lambda: sustained_rate(plain, computed),
        "shapes": lambda: computed / timed_forwards(plain, fresh),
        "past": lambda: computed / timed_forwards(plain, fresh, pasts),
        "extract": lambda: computed / run_windows(model, tqs, window),
    }
    rates: dict[str, list[float]] = {n: [] for n in steps}
    timed_forwards(plain, fresh[:2])  # warm-up
    names = list(steps)
    for r in range(rounds):
        for n in names[r % len(names):] + names[: r % len(names)]:
            rates[n].append(steps[n]())
            print(f"{label} round {r} {n}: {rates[n][-1]:.0f} tok/s", flush=True)

    def ratio(slow: str, fast: str) -> float:
        """Median over rounds of time(slow)/time(fast) for the same tokens."""
        return statistics.median(f / s for s, f in zip(rates[slow], rates[fast], strict=True))

    pairs = {"extract_vs_peak": ("extract", "peak"), "sustained_vs_peak": ("sustained", "peak"),
             "shapes_vs_sustained": ("shapes", "sustained"), "past_vs_shapes": ("past", "shapes"),
             "extract_vs_past": ("extract", "past"), "past_vs_peak": ("past", "peak"),
             "extract_vs_sustained": ("extract", "sustained")}
    out = {name: ratio(*pair) for name, pair in pairs.items()}
    out["windows_vs_unique"] = computed / unique
    return out


def plain_model(model: LoadedModel) -> PreTrainedModel:
    """The plain transformers model of ``model``'s weights (float32, eval mode)."""
    from transformers import AutoModelForCausalLM

    plain: PreTrainedModel = AutoModelForCausalLM.from_pretrained(model.info.weights_cache,
                                                                  dtype=torch.float32)
    plain.eval()  # type: ignore[no-untyped-call]
    return plain


def main() -> None:
    """Run the five measurements in rotating order and print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="coin-flip", help="coin-flip, or any environment")
    ap.add_argument("--set", dest="params", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment parameter (repeatable), as extract's --set")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--max-queries", type=int, default=0,
                    help="keep the first N queries (0: all): a long-context workload's slice")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--floor-repeat", type=int, default=3)
    add_clock_options(ap)
    add_results_option(ap)
    args = ap.parse_args()
    recorder = start_results(args)
    apply_clock(args)
    model = load("smollm2-135m")
    tqs = queries(model, bench_env(args.env, args.turns, parse_sets(args.params)), args.episodes)
    if args.max_queries > 0:
        tqs = tqs[: args.max_queries]
    print(f"clock={args.clock}")
    out = breakdown(model, plain_model(model), tqs, label=args.env, rounds=args.rounds,
                    floor_repeat=args.floor_repeat)
    line = " ".join(f"{k}={v:.2f}" for k, v in out.items())
    print(line)
    write_line_results(recorder, args.results, line)


if __name__ == "__main__":
    main()
