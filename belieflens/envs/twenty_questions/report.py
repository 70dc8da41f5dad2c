"""The ``twenty-questions`` analysis section: KL(oracle ‖ model) and the downstream gap per
step, mean ± SEM over games, and the games solved. What each quantity is (the model's and the
oracle's posteriors over Θ_k, the active oracle's game) is said where it is computed,
:mod:`belieflens.envs.twenty_questions.metrics`; this module only formats it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.dims import TURN
from belieflens.envs.twenty_questions.metrics import (
    answer_tally,
    games_solved,
    step_kl,
    step_table,
)
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

TITLE = "twenty-questions: posterior fidelity"
"""The section's heading."""


def _cell(t: xr.Dataset, var: str) -> tuple[str, int]:
    """``mean ± SEM`` over games of ``var`` in one turn's row of
    :func:`~belieflens.envs.twenty_questions.metrics.step_table` (``-`` where no game has a
    value)."""
    n = int(t[f"{var}_n"])
    if not n:
        return "-", 0
    mu, se = float(t[f"{var}_mean"]), float(t[f"{var}_sem"])
    return (f"{mu:.4f}" if np.isnan(se) else f"{mu:.4f} ± {se:.4f}"), n


def _plot(table: xr.Dataset, var: str, label: str, title: str, path: Path) -> Path:
    """Mean ± SEM over games of ``var`` per step k ≥ 1."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    x = table[TURN].values[1:]
    ax.errorbar(x, table[f"{var}_mean"].values[1:], yerr=table[f"{var}_sem"].values[1:],
                marker="o")
    if var == "gap":
        ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xlabel("step k")
    ax.set_ylabel(label)
    ax.set_title(title)
    return save(fig, path, dpi=100, tight=True)


def answers_clause(t: xr.Dataset) -> str:
    """``; answers: N (H hedges read as Partly, U stating no result read as No, T of G
    generations cut at the cap of C tokens: x%)`` of
    :func:`~belieflens.envs.twenty_questions.metrics.answer_tally`."""
    text = (f"; answers: {int(t['answers'])} ({int(t['hedged'])} hedges read as Partly, "
            f"{int(t['unstated'])} stating no result read as No")
    if "truncated" in t:
        n, cut = int(t["generated"]), int(t["truncated"])
        text += (f", {cut} of {n} answerer generations cut at the cap of {int(t['cap'])} "
                 f"tokens: {cut / max(n, 1):.0%}")
    return text + ")"


def twenty_questions_section(
    ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod = "geometric"
) -> Section:
    """Per step (mean ± SEM over games): KL(oracle ‖ model), the downstream gap
    p_ora-act(θ*) − p_LLM(θ*) where the file holds the active oracle's game, and |Θ_k|; the
    games solved and the answerer's replies (hedges, no result, cut at the token cap).

    ``method`` is unused: every read-out is a single Yes/No query (no rotations to pool)."""
    del method
    m = step_kl(ds)
    table = step_table(m)
    active = bool(table.attrs["active"])
    head = ["step k", "games", "KL(oracle ‖ model), nats"]
    head += ["games", "gap p_ora-act(θ*) − p_LLM(θ*)"] if active else []
    lines = ["  ".join([*head, "mean |Θk|"])]
    rows = ["| " + " | ".join([*head, "mean \\|Θk\\|"]) + " |", "|---" * (len(head) + 1) + "|"]
    for t in m[TURN].values.tolist()[1:]:
        row = table.sel({TURN: t})
        kl, n = _cell(row, "kl")
        cells = [str(t), str(n), kl]
        if active:
            gap, n_gap = _cell(row, "gap")
            cells += [str(n_gap), gap]
        cells.append(f"{float(row['size']):.1f}")
        lines.append("  ".join(cells))
        rows.append("| " + " | ".join(cells) + " |")
    games = games_solved(ds)
    tail = f"games answered Correct!: {int(games['solved'])} of {int(games['games'])}"
    if "active_solved" in games:
        tail += f"; by the active oracle: {int(games['active_solved'])}"
    tail += answers_clause(answer_tally(ds))
    lines.append(tail)
    files: list[Path] = []
    md = "\n".join(rows) + f"\n\n{tail}."
    if out_dir is not None and m.sizes[TURN] > 1:
        out = Path(out_dir)
        files.append(_plot(table, "kl", "KL(oracle ‖ model), nats", "20 Questions: posterior "
                           "fidelity", out / "twenty_questions_kl.png"))
        md += "\n\n![KL per step](twenty_questions_kl.png)"
        if active:
            files.append(_plot(table, "gap", "p_ora-act(θ*) − p_LLM(θ*)",
                               "20 Questions: downstream gap", out / "twenty_questions_gap.png"))
            md += "\n\n![downstream gap per step](twenty_questions_gap.png)"
    return Section(title=TITLE, text="\n".join(lines), markdown=md, files=tuple(files))
