"""The active oracle's game of ``twenty-questions``: From Prompts to Posteriors' third
trajectory (§4.2), "we let an active Bayesian agent update beliefs p_ora-act using Eq. 1 and
choose experiments based on those beliefs", for the downstream gap
p_ora-act(θ*) − p_LLM(θ*) of Fig. 4.

It plays the same secret against the same answerer, with the model's own lists and
likelihoods, but believes only Bayes' rule on them:

- its belief over Θ_k is the oracle posterior of §5.1: uniform over Θ_k times
  ∏_i p(y_i | θ, ξ_i) from the model's read-outs, θ dropped where one of them is ≤ 0.2
  (F.2.3); Θ_k keeps the ``hypotheses`` most probable θ of C_k = Θ_{k-1} ∪ Θ_new;
- its question: ``Is it Θ_k[0]?`` (its most probable θ) when 1 ≤ |Θ_k| ≤ 2 (F.2.4); else the
  model's ``candidates`` questions, the one of largest EIG with θ distributed as its belief
  over its ``eig_sample`` most probable hypotheses (renormalised) rather than uniformly;
- Θ0 is the model's game's (the same list, generated once), with a uniform belief.

``Correct!`` ends its game, and p_ora-act(θ*) = 1 from that step on (F.2.5). Its trajectory
is stored in the episode's truth (:func:`ActiveGame.play`); its likelihood read-outs are
logged as scores like the model's game's, but are not read-outs of the file.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from belieflens.envs.twenty_questions.bayes import (
    THRESHOLD,
    eig,
    likelihood,
    mass_on,
    oracle_posterior,
)
from belieflens.envs.twenty_questions.player import GameParams, Player, candidates_of
from belieflens.envs.twenty_questions.prompts import CORRECT, guess, likelihood_query
from belieflens.episodes.generation import OptionScorer, TextGenerator

ACTIVE_PREFIX = "active_step_"
"""Truth key prefix of the active game's record of each turn (JSON)."""

P_ACTIVE = "p_active_true_"
"""Truth key prefix of p_ora-act(θ*) at each turn (as ProteinWorld names it)."""


class ActiveGame(Player):
    """The active oracle's game (module docstring)."""

    offset: ClassVar[int] = 3

    def __init__(self, p: GameParams, secret: str, gen: TextGenerator, scorer: OptionScorer,
                 sim: TextGenerator, seed: int, *, hypotheses: int, eig_sample: int) -> None:
        super().__init__(p, secret, gen, scorer, sim, seed)
        self.limit, self.eig_sample = hypotheses, eig_sample
        self.lik: dict[tuple[str, str], float] = {}  # (θ, ξ) -> P(Yes | θ, ξ)

    def _scored(self, pairs: list[tuple[str, str]]) -> None:
        """Score the (θ, ξ) likelihood read-outs not read yet (one call)."""
        need = list(dict.fromkeys(k for k in pairs if k not in self.lik))
        for key, v in zip(need, self.p_yes([likelihood_query(t, q) for t, q in need]),
                          strict=True):
            self.lik[key] = v

    def _choose(self, theta: list[str], post: np.ndarray, turn: int,
                info: dict[str, Any]) -> str | None:
        """The question asked after turn ``turn``: the guess, or the largest EIG under the
        belief ``post`` over ``theta`` (most probable first)."""
        if 1 <= len(theta) <= 2:
            q = guess(theta[0])
            info.update(questions=[q], eig=[], asked=q)
            return q
        cands = self.questions(theta, turn)
        top = theta[: self.eig_sample]
        if not cands:
            info.update(questions=[], eig=[], asked=None)
            return None
        self._scored([(t, c) for c in cands for t in top])
        py = np.asarray([[self.lik[(t, c)] for t in top] for c in cands], dtype=np.float64)
        gains = eig(py.reshape(len(cands), len(top)), post[: len(top)] if top else None)
        best = int(np.argmax(gains))
        info.update(questions=cands, eig=[float(g) for g in gains], asked=cands[best])
        return cands[best]

    def _update(self, theta: list[str], k: int) -> tuple[list[str], np.ndarray]:
        """Θ_k and the belief over it after the k-th answer (Bayes' rule, the oracle's filter,
        the ``hypotheses`` most probable kept and renormalised)."""
        cands = candidates_of(theta, self.propose(k))
        self._scored([(t, q) for t in cands for q, _ in self.history])
        lik = np.asarray([[likelihood(self.lik[(t, q)], a) for q, a in self.history]
                          for t in cands], dtype=np.float64).reshape(len(cands), k)
        post = np.nan_to_num(oracle_posterior(lik, threshold=THRESHOLD))
        order = sorted((j for j in range(len(cands)) if post[j] > 0),
                       key=lambda j: (-post[j], j))[: self.limit]
        kept = post[order]
        return [cands[j] for j in order], kept / kept.sum() if kept.size else kept

    def play(self, theta0: list[str], steps: int) -> dict[str, float | str]:
        """Play up to ``steps`` questions from Θ0 = ``theta0``; the truth entries: per turn
        ``p_active_true_k`` (k = 0..steps; 1 from its ``Correct!`` on, NaN after a game that
        ended without a question) and ``active_step_k`` (JSON: ``hypotheses``, ``posterior``,
        and ``question`` / ``answer`` / ``raw_answer`` / ``answer_valid`` / ``questions`` /
        ``eig`` / ``asked`` as the model's game records them), and ``active_solved_at``."""
        theta = list(theta0)
        post = np.full(len(theta), 1.0 / len(theta)) if theta else np.zeros(0)
        records: list[dict[str, Any]] = [{}]
        p_true = [mass_on(theta, post, self.secret)]
        solved_at = -1
        for k in range(1, steps + 1):
            records[-1].update(hypotheses=theta, posterior=[float(x) for x in post])
            question = self._choose(theta, post, k - 1, records[-1])
            if question is None:
                break
            records.append(self.ask(question, k))
            if records[-1]["answer"] == CORRECT:
                solved_at = k
                break
            theta, post = self._update(theta, k)
            p_true.append(mass_on(theta, post, self.secret))
        if solved_at < 0:
            records[-1].setdefault("hypotheses", theta)
            records[-1].setdefault("posterior", [float(x) for x in post])
        truth: dict[str, float | str] = {"active_solved_at": float(solved_at)}
        for t in range(steps + 1):
            solved = 0 < solved_at <= t
            value = 1.0 if solved else p_true[t] if t < len(p_true) else float("nan")
            truth[f"{P_ACTIVE}{t}"] = value
        for t, record in enumerate(records):
            truth[f"{ACTIVE_PREFIX}{t}"] = json.dumps(record, ensure_ascii=False)
        return truth
