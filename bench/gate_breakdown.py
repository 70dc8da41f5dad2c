"""A gate run's measures on one condition, split by one factor of its grid: which part of a
condition a model misses (the stated priors, say, or the unnamed faces).

Reads the studies a ``belieflens gates`` run left in its folder (nothing is extracted), leaves
out the taught read-outs as the gates do, and measures each value of the factor apart with
:func:`belieflens.analysis.updating.updating`. It is a diagnosis of a run already judged: its
numbers do not change a verdict, and a recipe changed after reading them needs new gate
seeds.

Run: ``.venv/bin/python -m bench.gate_breakdown gates/coin-flip-teaching-2.toml --out runs/gates-2
--condition in-distribution --by prior [--results NAME]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._lib import add_results_option, start_results

COLUMNS = ("model", "factor", "delivery", "slope [95%]", "TVD to oracle", "TVD to target",
           "step R²", "read-outs kept")


def breakdown(file: Path, out: Path, condition: str, by: str) -> list[list[str]]:
    """One row per model, value of ``by`` and delivery."""
    from belieflens.analysis.updating import updating
    from belieflens.dims import DELIVERY, PROBE
    from belieflens.errors import ParameterError
    from belieflens.train.gate_run import condition_beliefs, taught_keys
    from belieflens.train.gates import load_gate_file

    gates = load_gate_file(file)
    if condition not in gates.conditions:
        raise ParameterError(f"condition {condition!r} is not in {file}: choose from "
                             + ", ".join(gates.conditions))
    values = sorted({str(p.get(by)) for p, _, _ in gates.episodes_of(condition)})
    if values == ["None"]:
        raise ParameterError(f"condition {condition!r} does not set {by!r}")
    keys = taught_keys(gates)
    rows = []
    for label, entry in gates.models.items():
        for value in values:

            def where(params: dict[str, Any], value: str = value) -> bool:
                return str(params.get(by)) == value

            beliefs, target, _, kept = condition_beliefs(
                gates, entry, None, condition, keys, out, where=where)
            m = updating(beliefs, target).sel({PROBE: gates.probe})
            for d in m[DELIVERY].values:
                r = m.sel({DELIVERY: d})
                rows.append([label, f"{by}={value}", str(d),
                             f"{float(r.slope):.3f} [{float(r.slope_lo):.3f}, "
                             f"{float(r.slope_hi):.3f}]",
                             f"{float(r.tvd_oracle):.4f}", f"{float(r.tvd_target):.4f}",
                             f"{float(r.step_r2):.3f}", str(kept)])
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Print (and with ``--results`` write) the breakdown."""
    from belieflens.errors import ParameterError

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("file", type=Path, help="the gate file the run read")
    ap.add_argument("--out", type=Path, required=True, help="the gate run's folder")
    ap.add_argument("--condition", required=True)
    ap.add_argument("--by", required=True, help="a parameter of the condition's grid")
    add_results_option(ap)
    args = ap.parse_args(argv)
    recorder = start_results(args, threads=1)
    try:
        rows = breakdown(args.file, args.out, args.condition, args.by)
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    for line in (list(COLUMNS), *rows):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)))
    if recorder is not None:
        recorder.write(args.results, COLUMNS, rows, note=f"{args.condition} by {args.by}, "
                       f"from the studies in {args.out}; a diagnosis of a run already judged")


if __name__ == "__main__":
    main()
