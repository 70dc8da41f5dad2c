"""What the shipped teaching recipe costs per step on a larger model, beside SmolLM2-135M in
the same process: the ``smollm2-135m-bayes`` recipe (its 40-condition mix, trees, batch,
rank, learning rate and 1,320-step schedule) taught into a temporary folder for ``--steps``
steps on the embedded SmolLM2-135M and on ``MODEL`` (its adapted blocks ``--layers``: the
recipe adapts the top 22 of SmolLM2's 30), the same seed, so the same trees in the same order.

Printed per model: the CPU seconds and wall seconds per step after the first (the first
builds what later steps reuse), and the recipe's 1,320 steps at that rate in CPU hours; last
line ``cpu_ratio=R model_cpu_hours=H smollm2_cpu_hours=H`` (``MODEL`` against SmolLM2-135M).
Run: ``.venv/bin/python -m bench.teach_cost qwen2.5-coder-0.5b --layers 6-23 [--steps 12]
[--threads 2] [--results NAME]`` (the model installed: ``make model-NAME``).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from bench._lib import add_results_option, start_results, write_line_results


def per_step(model: str, layers: tuple[int, ...], steps: int, threads: int
             ) -> tuple[float, float]:
    """CPU and wall seconds per step after the first, of the shipped recipe on ``model``."""
    from belieflens.train.teach import SHIPPED, teach

    shipped = SHIPPED["smollm2-135m-bayes"]
    config = dataclasses.replace(shipped, model=model, layers=layers or shipped.layers)
    marks: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        teach(config, Path(tmp) / "adapter", threads=threads, stop_after=steps,
              on_step=lambda p: marks.append((time.process_time(), time.perf_counter())))
    (c0, w0), (c1, w1) = marks[0], marks[-1]
    n = len(marks) - 1
    return (c1 - c0) / n, (w1 - w0) / n


def main() -> None:
    """Time the recipe's steps on SmolLM2-135M and on the model given; print the ratio."""
    from belieflens.cli.intervene import parse_layers
    from belieflens.train.teach import SHIPPED

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--layers", default="", help="the model's adapted blocks, e.g. 6-23")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    add_results_option(ap)
    args = ap.parse_args()
    recorder = start_results(args)
    total = SHIPPED["smollm2-135m-bayes"].schedule or SHIPPED["smollm2-135m-bayes"].steps
    hours = {}
    for name, layers in (("smollm2-135m", ()), (args.model, tuple(parse_layers(args.layers)
                                                                   or ()))):
        cpu, wall = per_step(name, layers, args.steps, args.threads)
        hours[name] = cpu * total / 3600
        print(f"{name}: {cpu:.2f} s CPU, {wall:.2f} s wall a step; {total} steps: "
              f"{hours[name]:.2f} CPU hours", flush=True)
    figures = {"cpu_ratio": hours[args.model] / hours["smollm2-135m"],
               "model_cpu_hours": hours[args.model], "smollm2_cpu_hours": hours["smollm2-135m"]}
    line = " ".join(f"{k}={v:.2f}" for k, v in figures.items())
    print(line)
    write_line_results(recorder, args.results, line)


if __name__ == "__main__":
    main()
