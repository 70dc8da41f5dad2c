"""The ``twenty-questions`` analysis section: posterior fidelity per step (From Prompts to
Posteriors, §4.2), KL(oracle ‖ model) with the oracle first.

At turn k of each game, from the stored read-outs (P(Yes) normalised over Yes/No) and the
episode's ``step_k`` truth (Θ_k and the candidates C_k the read-outs index):

- the model's posterior over Θ_k: the ``compat/j`` read-outs of Θ_k normalised across Θ_k;
- the oracle's: uniform over Θ_k times ∏_{i ≤ k} p(y_i | θ, ξ_i) from the ``likelihood/i/j``
  read-outs (wherever in the game each was first read), θ dropped where one is ≤ 0.2;
- ``kl`` = KL(oracle ‖ model) in nats (NaN where Θ_k is empty or no θ survives the oracle's
  filter; turns after ``Correct!`` are not recorded, as in the paper).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.stats import mean_sem
from belieflens.analysis.truth import episode_truth, has_truth
from belieflens.dims import EPISODE, TURN
from belieflens.envs.twenty_questions.bayes import (
    kl_divergence,
    likelihood,
    model_posterior,
    oracle_posterior,
    p_yes,
)
from belieflens.errors import CacheFileError
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

TITLE = "twenty-questions: posterior fidelity"
"""The section's heading."""


def _readouts(ds: xr.Dataset) -> dict[tuple[int, int, str], float]:
    """P(Yes) of every read-out, keyed by (episode, turn, probe)."""
    lp = np.asarray(ds["option_logprob"].values, dtype=np.float64)
    outcome = np.asarray(ds["outcome"].values).astype(np.int64)
    episode = np.asarray(ds[EPISODE].values).astype(np.int64)
    turn = np.asarray(ds[TURN].values).astype(np.int64)
    probe = np.asarray(ds["probe"].values).astype(str)
    out: dict[tuple[int, int, str], float] = {}
    for q in range(lp.shape[0]):
        yes = int(np.flatnonzero(outcome[q] == 0)[0])
        no = int(np.flatnonzero(outcome[q] == 1)[0])
        out[(int(episode[q]), int(turn[q]), str(probe[q]))] = p_yes(lp[q, yes], lp[q, no])
    return out


def _steps(ds: xr.Dataset, turns: list[int]) -> dict[int, list[dict[str, Any] | None]]:
    """Per episode, the parsed ``step_k`` truth of each turn (``None`` where absent)."""
    cols = {t: episode_truth(ds, f"step_{t}") if has_truth(ds, f"step_{t}") else None
            for t in turns}
    episodes = np.unique(np.asarray(ds[EPISODE].values).astype(np.int64))
    out: dict[int, list[dict[str, Any] | None]] = {}
    for e in episodes.tolist():
        row: list[dict[str, Any] | None] = []
        for t in turns:
            col = cols[t]
            text = "" if col is None else str(col.sel({EPISODE: e}).item())
            row.append(json.loads(text) if text else None)
        out[int(e)] = row
    return out


def step_kl(ds: xr.Dataset) -> xr.Dataset:
    """Per (episode, turn): ``kl`` = KL(oracle ‖ model), ``n_hypotheses`` = |Θ_k|,
    ``oracle_support`` (hypotheses the oracle's filter keeps) and the two posteriors' mass on
    the secret animal, ``p_model_secret`` / ``p_oracle_secret`` (0 where it is not in Θ_k)."""
    if not has_truth(ds, "step_0") or not has_truth(ds, "secret"):
        raise CacheFileError("cache file is not a twenty-questions file (no step_0 truth)")
    turns = sorted({int(t) for t in np.asarray(ds[TURN].values).tolist()} | {0})
    last = max(turns)
    turns = list(range(last + 1))
    while has_truth(ds, f"step_{turns[-1] + 1}"):
        turns.append(turns[-1] + 1)
    steps = _steps(ds, turns)
    reads = _readouts(ds)
    secrets = episode_truth(ds, "secret")
    episodes = sorted(steps)
    names = ("kl", "n_hypotheses", "oracle_support", "p_model_secret", "p_oracle_secret")
    data = {n: np.full((len(episodes), len(turns)), np.nan) for n in names}
    for a, e in enumerate(episodes):
        secret = str(secrets.sel({EPISODE: e}).item()).casefold()
        answers: dict[int, str] = {}
        p_of: dict[tuple[str, int], float] = {}
        for t, info in zip(turns, steps[e], strict=True):
            if info is None or t == 0:
                continue
            answers[t] = str(info["answer"])
            cands = [str(c) for c in info.get("candidates", [])]
            for j, c in enumerate(cands):
                for i in range(1, t + 1):
                    v = reads.get((e, t, f"likelihood/{i}/{j}"))
                    if v is not None:
                        p_of.setdefault((c, i), v)
            if "hypotheses" not in info:
                continue  # answered Correct!: the run ends, nothing recorded
            theta = [str(h) for h in info["hypotheses"]]
            index = {c: j for j, c in enumerate(cands)}
            compat = np.asarray([reads[(e, t, f"compat/{index[h]}")] for h in theta])
            lik = np.asarray([[likelihood(p_of[(h, i)], answers[i]) for i in range(1, t + 1)]
                              for h in theta]).reshape(len(theta), t)
            pm, po = model_posterior(compat), oracle_posterior(lik)
            at = [j for j, h in enumerate(theta) if h.casefold() == secret]
            data["kl"][a, t] = kl_divergence(po, pm) if len(theta) else np.nan
            data["n_hypotheses"][a, t] = len(theta)
            data["oracle_support"][a, t] = float(np.sum(np.nan_to_num(po) > 0))
            data["p_model_secret"][a, t] = float(pm[at].sum()) if len(theta) else np.nan
            data["p_oracle_secret"][a, t] = float(po[at].sum()) if len(theta) else np.nan
    coords = {EPISODE: episodes, TURN: turns}
    return xr.Dataset({n: ((EPISODE, TURN), v) for n, v in data.items()}, coords=coords)


def twenty_questions_section(
    ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod = "geometric"
) -> Section:
    """KL(oracle ‖ model) per step (mean ± SEM over games), |Θ_k| and the games solved.

    ``method`` is unused: every read-out is a single Yes/No query (no rotations to pool)."""
    del method
    m = step_kl(ds)
    stats = mean_sem(m["kl"])
    size = m["n_hypotheses"].mean(EPISODE, skipna=True)
    solved = episode_truth(ds, "solved_at")
    lines = [f"{'step':>4}  {'games':>5}  {'KL(oracle||model)':>20}  {'mean |Θk|':>9}"]
    rows = ["| step k | games | KL(oracle ‖ model), nats | mean \\|Θk\\| |", "|---|---|---|---|"]
    for t in m[TURN].values.tolist()[1:]:
        n = int(m["kl"].sel({TURN: t}).notnull().sum())
        mu, se = float(stats["mean"].sel({TURN: t})), float(stats["sem"].sel({TURN: t}))
        sz = float(size.sel({TURN: t}))
        cell = "-" if not n else f"{mu:.4f}" if np.isnan(se) else f"{mu:.4f} ± {se:.4f}"
        lines.append(f"{t:>4}  {n:>5}  {cell:>20}  {sz:>9.1f}")
        rows.append(f"| {t} | {n} | {cell} | {sz:.1f} |")
    won = int((solved.values > 0).sum())
    tail = f"games answered Correct!: {won} of {solved.sizes[EPISODE]}"
    lines.append(tail)
    files: list[Path] = []
    md = "\n".join(rows) + f"\n\n{tail}."
    if out_dir is not None and m.sizes[TURN] > 1:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        x = m[TURN].values[1:]
        ax.errorbar(x, stats["mean"].values[1:], yerr=stats["sem"].values[1:], marker="o")
        ax.set_xlabel("step k")
        ax.set_ylabel("KL(oracle ‖ model), nats")
        ax.set_title("20 Questions: posterior fidelity")
        path = Path(out_dir) / "twenty_questions_kl.png"
        save(fig, path, dpi=100, tight=True)
        files.append(path)
        md += f"\n\n![KL per step]({path.name})"
    return Section(title=TITLE, text="\n".join(lines), markdown=md, files=tuple(files))
