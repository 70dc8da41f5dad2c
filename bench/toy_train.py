"""Training throughput of :func:`belieflens.train.toy.train` against a plain PyTorch loop over
the same model, in the same run.

The plain loop is what one writes first: transformers' ``GPT2LMHeadModel`` called as a module,
``F.cross_entropy`` on its logits, ``torch.optim.Adam`` with its defaults, on the same batches
(the same sampler, the same seed). The trainer is ``train()`` itself (its fused forward over
the module's parameters, fused Adam, its schedule, its progress callback), timed by its own
``on_step`` reports. The two alternate ``--repeats`` times, ``--steps`` steps each; each
figure is the median tokens/s (every input position counts as a token).

Last line: ``trainer_tok_s=... plain_tok_s=... ratio=...``.
Run: ``.venv/bin/python -m bench.toy_train [--toy mess3-toy] [--steps 60] [--threads 2]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from belieflens.train.toy import (
    TOY_NAMES,
    TOYS,
    Progress,
    ToyConfig,
    build_model,
    make_process,
    train,
    training_batch,
)
from bench._lib import add_results_option, start_results, write_line_results


def plain_loop(config: ToyConfig, steps: int) -> float:
    """Tokens/s of a plain loop: module forward, cross-entropy, default Adam."""
    process = make_process(config)
    model = build_model(config, process)
    vocab = int(model.config.vocab_size)
    optim = torch.optim.Adam(model.parameters(), lr=config.lr)
    tokens = 0
    t0 = time.perf_counter()
    for step in range(steps):
        inputs, targets = training_batch(process, config, step)
        logits = model(input_ids=torch.from_numpy(inputs)).logits
        loss = F.cross_entropy(logits.view(-1, vocab), torch.from_numpy(targets).view(-1))
        optim.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optim.step()
        tokens += inputs.size
    return tokens / (time.perf_counter() - t0)


def trainer(config: ToyConfig, steps: int) -> float:
    """Tokens/s of ``train()`` over ``steps`` steps (its loop only, as it reports)."""
    reports: list[Progress] = []
    cfg = dataclasses.replace(config, steps=steps, warmup=min(config.warmup, steps),
                              checkpoint_every=10**8)
    with tempfile.TemporaryDirectory() as tmp:
        train(cfg, Path(tmp) / "toy", progress=False, on_step=reports.append)
    return reports[-1].tokens_per_s


def main(argv: Sequence[str] | None = None) -> None:
    """Alternate the two loops and print their median tokens/s and the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--toy", choices=TOY_NAMES, default="mess3-toy")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    add_results_option(ap)
    args = ap.parse_args(argv)
    recorder = start_results(args)
    torch.set_num_threads(args.threads)
    config = TOYS[args.toy]
    print(f"{args.toy}: {config.process} {dict(config.params)}; {config.n_layer} layers, "
          f"d_model {config.d_model}, {config.n_head} head(s), d_mlp {config.d_mlp}; batch "
          f"{config.batch}; {args.threads} threads; {args.steps} steps x {args.repeats}")
    plain_loop(config, 3)  # warm-up: imports, allocator
    fast, plain = [], []
    for r in range(args.repeats):
        plain.append(plain_loop(config, args.steps))
        fast.append(trainer(config, args.steps))
        print(f"repeat {r}: trainer {fast[-1]:,.0f} tok/s, plain loop {plain[-1]:,.0f} tok/s")
    f, p = float(np.median(fast)), float(np.median(plain))
    line = f"trainer_tok_s={f:.0f} plain_tok_s={p:.0f} ratio={f / p:.2f}"
    print(line)
    write_line_results(recorder, args.results, line)


if __name__ == "__main__":
    main()
