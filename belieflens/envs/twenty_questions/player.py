"""What both games of a ``twenty-questions`` episode do alike: the model's seeded lists of
animals and questions, its P(Yes) read-outs, and the answerer's reply.

An episode plays two games about one secret animal (From Prompts to Posteriors, §4.2): the
model's own (:class:`~belieflens.envs.twenty_questions.env.TwentyQuestions`), and the active
oracle's (:mod:`.active`), which updates its beliefs by Bayes' rule on the model's likelihoods
and chooses its questions on those beliefs. Each is a :class:`Player`: every generation of
step ``k`` is seeded with ``derive_seed(seed, k, what + offset)``, ``what`` saying which
generation it is and ``offset`` which game (0: the model's, 3: the active oracle's), so the
two games never share a seed but Θ0, generated once from the empty history, is the same.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from belieflens.envs.twenty_questions.answers import parse_answer
from belieflens.envs.twenty_questions.bayes import p_yes
from belieflens.envs.twenty_questions.prompts import (
    answer_prompt,
    hypotheses_prompt,
    parse_hypotheses,
    parse_questions,
    questions_prompt,
)
from belieflens.episodes.base import Message, Query
from belieflens.episodes.generation import OptionScorer, TextGenerator, derive_seed

HYPOTHESES, QUESTIONS, ANSWER = 0, 1, 2
"""What each generation of a step is for (the last key of its seed, before the offset)."""


class GameParams(Protocol):
    """The parameters a game reads (:class:`~.env.TwentyQuestionsParams`)."""

    @property
    def propose(self) -> int:
        """Animals asked for per list."""
        ...

    @property
    def candidates(self) -> int:
        """Candidate questions asked for per step."""
        ...

    @property
    def max_chars(self) -> int:
        """Longest belief kept."""
        ...

    @property
    def temperature(self) -> float:
        """Temperature of lists."""
        ...

    @property
    def answer_temperature(self) -> float:
        """Temperature of the answerer."""
        ...

    @property
    def list_tokens(self) -> int:
        """Max new tokens of a list."""
        ...

    @property
    def answer_tokens(self) -> int:
        """Max new tokens of an answer."""
        ...


class Player:
    """One game being played: its history of (question, answer), its seeded calls."""

    offset: ClassVar[int] = 0
    """Added to the last key of every seed (0: the model's game)."""

    def __init__(self, p: GameParams, secret: str, gen: TextGenerator, scorer: OptionScorer,
                 sim: TextGenerator, seed: int) -> None:
        self.p, self.secret, self.gen, self.scorer, self.sim = p, secret, gen, scorer, sim
        self.seed = seed
        self.history: list[tuple[str, str]] = []

    def _seed(self, step: int, what: int) -> int:
        return derive_seed(self.seed, step, what + self.offset)

    def _list(self, messages: tuple[Message, ...], step: int, what: int) -> str:
        p = self.p
        return self.gen(messages, seed=self._seed(step, what), max_new_tokens=p.list_tokens,
                        temperature=p.temperature)

    def p_yes(self, queries: list[Query]) -> list[float]:
        """P(Yes) of each Yes/No read-out, normalised over Yes and No (the model's scores)."""
        scores = self.scorer.score(queries) if queries else ()
        return [p_yes(s[0], s[1]) for s in scores]

    def propose(self, step: int) -> list[str]:
        """Θ0 (step 0, empty history) or Θ_new after the answer of ``step``."""
        text = self._list(hypotheses_prompt(self.history, self.p.propose), step, HYPOTHESES)
        return parse_hypotheses(text, max_chars=self.p.max_chars)

    def questions(self, theta: list[str], turn: int) -> list[str]:
        """The candidate questions the model writes after turn ``turn``, given Θ."""
        text = self._list(questions_prompt(theta, self.history, self.p.candidates), turn,
                          QUESTIONS)
        return parse_questions(text, self.p.candidates)

    def ask(self, question: str, step: int) -> dict[str, Any]:
        """Ask the answerer ``question`` as step ``step``: the answer joins the history; the
        step's record (``question``, ``answer``, ``raw_answer``, ``answer_valid``). The reply
        reads ``Correct!`` only when ``question`` is a guess naming the secret
        (:func:`~.answers.parse_answer`)."""
        raw = self.sim(answer_prompt(self.secret, question), seed=self._seed(step, ANSWER),
                       max_new_tokens=self.p.answer_tokens,
                       temperature=self.p.answer_temperature)
        answer, valid = parse_answer(raw, question, self.secret)
        self.history.append((question, answer))
        return {"question": question, "answer": answer, "raw_answer": raw, "answer_valid": valid}


def candidates_of(theta: list[str], new: list[str]) -> list[str]:
    """C_k = Θ_{k-1} ∪ Θ_new, in that order, each name once (case-insensitive)."""
    seen = {t.casefold() for t in theta}
    out = list(theta)
    for t in new:
        if t.casefold() not in seen:
            seen.add(t.casefold())
            out.append(t)
    return out
