"""Twenty-questions metrics of a cache file, as xarray objects: posterior fidelity (From
Prompts to Posteriors, §4.2), KL(oracle ‖ model) with the oracle first, and the downstream gap
of Fig. 4, per game and turn (:func:`step_kl`), per step over games (:func:`step_table`), and
the games solved (:func:`games_solved`), and the answerer's replies (:func:`answer_tally`:
hedges, replies stating no result, replies cut at the token cap).

At turn k of each game, from the stored read-outs (P(Yes) normalised over Yes/No) and the
episode's ``step_k`` truth (Θ_k and the candidates C_k the read-outs index):

- the model's posterior over Θ_k: the ``compat/j`` read-outs of Θ_k normalised across Θ_k;
- the oracle's: uniform over Θ_k times ∏_{i ≤ k} p(y_i | θ, ξ_i) from the ``likelihood/i/j``
  read-outs (wherever in the game each was first read), θ dropped where one is ≤ 0.2;
- ``kl`` = KL(oracle ‖ model) in nats (NaN where Θ_k is empty or no θ survives the oracle's
  filter; turns after ``Correct!`` are not recorded, as in the paper);
- the downstream gap p_ora-act(θ*) − p_LLM(θ*): the active oracle's posterior mass on the
  secret after k of its own questions (its game, :mod:`.active`, stored as
  ``p_active_true_k``) minus the model's; after a game's ``Correct!`` its p(θ*) is 1 for every
  later step (App. F.2.5: "we set p(θ*)_j = 1 ∀ j ≥ k+1").
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import xarray as xr

from belieflens.analysis.stats import mean_sem
from belieflens.analysis.truth import episode_truth, has_truth
from belieflens.dims import EPISODE, TURN
from belieflens.envs.twenty_questions.active import ACTIVE_PREFIX, P_ACTIVE
from belieflens.envs.twenty_questions.bayes import (
    kl_divergence,
    likelihood,
    mass_on,
    model_posterior,
    oracle_posterior,
    p_yes,
)
from belieflens.envs.twenty_questions.prompts import ANSWERER_SYSTEM, HEDGE
from belieflens.errors import CacheFileError
from belieflens.run.generation_log import LOG_VARIABLE, read_log


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


METRICS = ("kl", "n_hypotheses", "oracle_support", "p_model_secret", "p_oracle_secret",
           "p_active_secret", "gap")
"""The variables of :func:`step_kl`."""


def _turns(ds: xr.Dataset) -> list[int]:
    """Turns 0..T: T the games' ``steps`` where the file records it, else the last turn with
    a read-out or a ``step_k`` record."""
    last = max(int(t) for t in np.asarray(ds[TURN].values).tolist())
    if has_truth(ds, "steps"):
        last = max(last, int(np.nanmax(episode_truth(ds, "steps").values)))
    while has_truth(ds, f"step_{last + 1}"):
        last += 1
    return list(range(last + 1))


def _game_row(e: int, steps: list[dict[str, Any] | None], turns: list[int], secret: str,
              reads: dict[tuple[int, int, str], float]) -> dict[str, np.ndarray]:
    """The per-turn metrics of episode ``e``'s own game (no active oracle, no Correct! rule)."""
    out = {n: np.full(len(turns), np.nan) for n in METRICS}
    answers: dict[int, str] = {}
    p_of: dict[tuple[str, int], float] = {}
    for t, info in zip(turns, steps, strict=True):
        if info is None:
            continue
        if t == 0:  # an empty history fits every θ: both posteriors are uniform over Θ0
            theta0 = [str(h) for h in info.get("hypotheses", [])]
            uniform = np.full(len(theta0), 1.0 / max(len(theta0), 1))
            out["p_model_secret"][0] = out["p_oracle_secret"][0] = mass_on(theta0, uniform,
                                                                            secret)
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
        out["kl"][t] = kl_divergence(po, pm) if len(theta) else np.nan
        out["n_hypotheses"][t] = len(theta)
        out["oracle_support"][t] = float(np.sum(np.nan_to_num(po) > 0))
        out["p_model_secret"][t] = mass_on(theta, pm, secret)
        out["p_oracle_secret"][t] = mass_on(theta, po, secret)
    return out


def step_kl(ds: xr.Dataset) -> xr.Dataset:
    """Per (episode, turn): ``kl`` = KL(oracle ‖ model), ``n_hypotheses`` = |Θ_k|,
    ``oracle_support`` (hypotheses the oracle's filter keeps), the mass on the secret animal
    of the model's posterior (``p_model_secret``, p_LLM(θ*)) and of the oracle's on the same
    history (``p_oracle_secret``, p_ora-pas(θ*)), 0 where θ* is not in Θ_k and uniform over Θ0
    at turn 0; the active oracle's (``p_active_secret``, p_ora-act(θ*), from its own game) and
    the downstream ``gap`` = p_ora-act(θ*) − p_LLM(θ*) (Fig. 4).

    After a game's ``Correct!`` its p(θ*) is 1 at that turn and every later one up to T, and
    its KL is not recorded (App. F.2.5); turns after a game that stopped without a question
    are NaN."""
    if not has_truth(ds, "step_0") or not has_truth(ds, "secret"):
        raise CacheFileError("cache file is not a twenty-questions file (no step_0 truth)")
    turns = _turns(ds)
    steps = _steps(ds, turns)
    reads = _readouts(ds)
    secrets = episode_truth(ds, "secret")
    solved = episode_truth(ds, "solved_at")
    active = [_truth_per_turn(ds, f"{P_ACTIVE}{t}") for t in turns]
    episodes = sorted(steps)
    data = {n: np.full((len(episodes), len(turns)), np.nan) for n in METRICS}
    for a, e in enumerate(episodes):
        row = _game_row(e, steps[e], turns, str(secrets.sel({EPISODE: e}).item()), reads)
        s = float(solved.sel({EPISODE: e}).item())
        if s > 0:
            after = np.asarray(turns) >= s
            row["p_model_secret"][after] = row["p_oracle_secret"][after] = 1.0
            row["kl"][after] = np.nan
        row["p_active_secret"] = np.array([np.nan if col is None else
                                           float(col.sel({EPISODE: e}).item()) for col in active])
        row["gap"] = row["p_active_secret"] - row["p_model_secret"]
        for n in METRICS:
            data[n][a] = row[n]
    coords = {EPISODE: episodes, TURN: turns}
    return xr.Dataset({n: ((EPISODE, TURN), v) for n, v in data.items()}, coords=coords)


def _truth_per_turn(ds: xr.Dataset, key: str) -> xr.DataArray | None:
    return episode_truth(ds, key) if has_truth(ds, key) else None


def step_table(m: xr.Dataset) -> xr.Dataset:
    """Per turn of :func:`step_kl`, over games: ``kl_mean``, ``kl_sem``, ``kl_n`` and the same
    for ``gap``, and ``size`` (mean |Θ_k|); ``attrs["active"]``: whether the file holds the
    active oracle's game."""
    out = xr.Dataset(coords={TURN: m[TURN].values})
    for var in ("kl", "gap"):
        cells = [mean_sem(m[var].sel({TURN: t}).expand_dims(TURN)) for t in m[TURN].values]
        out[f"{var}_mean"] = ((TURN,), [float(c["mean"].values[0]) for c in cells])
        out[f"{var}_sem"] = ((TURN,), [float(c["sem"].values[0]) for c in cells])
        out[f"{var}_n"] = m[var].notnull().sum(EPISODE)
    out["size"] = m["n_hypotheses"].mean(EPISODE, skipna=True)
    return out.assign_attrs(active=bool(m["p_active_secret"].notnull().any()))


def games_solved(ds: xr.Dataset) -> xr.Dataset:
    """``games``, the games answered ``Correct!`` (``solved``) and, where the file holds the
    active oracle's games, the ones it solved (``active_solved``); scalars."""
    solved = episode_truth(ds, "solved_at")
    out = xr.Dataset({"games": solved.sizes[EPISODE], "solved": int((solved.values > 0).sum())})
    if has_truth(ds, "active_solved_at"):
        out["active_solved"] = int((episode_truth(ds, "active_solved_at").values > 0).sum())
    return out


def _answer_records(ds: xr.Dataset) -> list[dict[str, Any]]:
    """Every answered question's step record, of the model's game and the active oracle's."""
    out: list[dict[str, Any]] = []
    names = [str(n)[len("truth_"):] for n in ds.data_vars if str(n).startswith("truth_")]
    for name in names:
        if not (name.startswith("step_") or name.startswith(ACTIVE_PREFIX)):
            continue
        for text in episode_truth(ds, name).values.astype(str):
            record = json.loads(text) if text else {}
            if "answer" in record:
                out.append(record)
    return out


def answer_tally(ds: xr.Dataset) -> xr.Dataset:
    """The answerer's replies over both games: ``answers``, ``hedged`` (read as ``Partly``),
    ``unstated`` (stating no result, read as ``No``: ``answer_valid`` false); and, where the
    file holds its generation log, ``generated`` (the answerer's generations) and
    ``truncated`` (those stopped by the ``answer_tokens`` cap rather than by the model), with
    ``cap`` the largest cap used. Scalars."""
    records = _answer_records(ds)
    out = xr.Dataset({
        "answers": len(records),
        "hedged": sum(r["answer"] == HEDGE for r in records),
        "unstated": sum(not r.get("answer_valid", True) for r in records),
    })
    if LOG_VARIABLE in ds.variables:
        calls = [r for r in read_log(ds) if r.stop in ("eos", "length") and r.messages
                 and r.messages[0].role == "system"
                 and r.messages[0].content.startswith(ANSWERER_SYSTEM)]
        out["generated"] = len(calls)
        out["truncated"] = sum(r.stop == "length" for r in calls)
        out["cap"] = max((r.max_new_tokens for r in calls), default=0)
    return out

