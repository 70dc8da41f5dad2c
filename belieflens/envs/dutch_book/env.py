"""Dutch-book coherence: credences in related yes/no forecast questions.

Each episode is one :class:`~belieflens.envs.dutch_book.scenarios.Scenario`;
turn ``t`` asks its ``t``-th question (in the episode's question order) under
both answer orders. The credence in the question is P(Yes) renormalised over
Yes/No and debiased over the two orders; :mod:`belieflens.envs.dutch_book.coherence`
turns a scenario's credences into a Dutch book and its sure loss.

Read-outs (``readout``):

- ``mcq`` (default): ``A. Yes`` / ``B. No`` and the reverse, read as the letter
  after ``Answer:``; one option per answer.
- ``yes-no``: the question ends "Answer Yes or No." (or "No or Yes.") and the
  answer is read as the word after ``Answer:``, with the variants
  :data:`YES_VARIANTS` / :data:`NO_VARIANTS` as separate options of one
  rotation; :mod:`belieflens.envs.dutch_book.credence` sums the variants of each answer.

Deliveries:

- ``single-turn`` (across conversations): every question in a fresh chat.
- ``multi-turn`` (within one dialogue): the earlier questions stay in context,
  each followed by an assistant turn: by default the fixed neutral
  :data:`PLACEHOLDER_ANSWER`; with ``answers=model`` the model's own greedy reply
  to each earlier question (``requires_generator``: ``belieflens extract`` binds
  the evaluated model), generated in order so each reply sees the earlier ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from belieflens.envs.dutch_book.report import dutch_book_section
from belieflens.envs.dutch_book.scenarios import (
    Scenario,
    load_scenarios,
    shipped_scenarios,
)
from belieflens.envs.registry import register
from belieflens.episodes.base import (
    Configured,
    Episode,
    Marked,
    Message,
    Probe,
    Query,
    Turn,
    append_user,
)
from belieflens.episodes.capabilities import GeneratorBinding
from belieflens.episodes.delivery import Delivers, require_generator
from belieflens.episodes.generation import derive_seed
from belieflens.episodes.params import bad, int_in, param
from belieflens.episodes.questions import DEFAULT_PREFILL, mcq_probe, mcq_text
from belieflens.report.section import SectionFn
from belieflens.types import Delivery

LABELS = ("Yes", "No")
"""Outcome labels of every question: outcome 0 is Yes."""

PREAMBLE = "Here is a forecasting question. Give your best judgement."
"""Opening line of every question."""

PLACEHOLDER_ANSWER = "I have given my answer to this question."
"""Neutral assistant turn standing in for the model's own earlier answers (``multi-turn``)."""

PROBE = "credence"
"""Name of the Yes/No probe."""

YES_VARIANTS = (" Yes", " yes")
"""Continuations of ``Answer:`` read as Yes (``readout=yes-no``)."""

NO_VARIANTS = (" No", " no")
"""Continuations of ``Answer:`` read as No (``readout=yes-no``)."""


@dataclass(frozen=True)
class DutchBookParams(Delivers):
    """Parameters of the Dutch-book environment."""

    questions: str | None = param(
        None, "path of a JSON scenario set; default: the shipped set (36 scenarios)"
    )
    kind: Literal["all", "normalisation", "monotonicity", "extensionality"] = param(
        "all", "which scenarios to ask"
    )
    order: Literal["listed", "shuffled"] = param(
        "listed", "ask a scenario's questions in listed order or a seeded shuffle"
    )
    delivery: Literal["single-turn", "multi-turn", "all"] = param(
        "all", "single-turn: each question in a fresh chat; multi-turn: one dialogue"
    )
    readout: Literal["mcq", "yes-no"] = param(
        "mcq", "mcq: A/B letters; yes-no: the words Yes/No with variants (yes, no) summed"
    )
    answers: Literal["placeholder", "model"] = param(
        "placeholder",
        "multi-turn: earlier answers are a fixed placeholder, or the model's own greedy replies",
    )
    answer_tokens: int = param(16, "max new tokens of each generated answer (answers=model)")

    def __post_init__(self) -> None:
        if self.questions is not None and not self.questions.strip():
            raise bad("questions", self.questions, "a path to a JSON file or none")
        int_in("answer_tokens", self.answer_tokens, 1, 256)


def question_text(question: str) -> str:
    """The user's words asking one forecast question (before the MCQ options)."""
    return f"{PREAMBLE}\n{question}"


def yes_no_text(question: str, rotation: int) -> str:
    """The user's words of a direct Yes/No question; rotation 1 names No first."""
    order = "Yes or No" if rotation == 0 else "No or Yes"
    return f"{question_text(question)}\nAnswer {order}."


def yes_no_probe(context: tuple[Message, ...], question: str, delivery: Delivery) -> Probe:
    """A Yes/No probe read as the answer word, variants as extra options, both orders.

    Under rotation 0 the options are ``Yes, No, yes, no`` (outcomes ``0, 1, 0, 1``);
    under rotation 1 ``No, Yes, no, yes``. The first two options of each rotation
    form a Latin square, so generic debiasing over the main words works too.
    """
    queries = []
    for r in range(2):
        first, second = (YES_VARIANTS, NO_VARIANTS) if r == 0 else (NO_VARIANTS, YES_VARIANTS)
        options = (first[0], second[0], *first[1:], *second[1:])
        o1, o2 = (0, 1) if r == 0 else (1, 0)
        outcome = (o1, o2, *([o1] * (len(first) - 1)), *([o2] * (len(second) - 1)))
        queries.append(Query(messages=append_user(context, yes_no_text(question, r)),
                             prefill=DEFAULT_PREFILL, options=options, outcome=outcome,
                             rotation=r))
    return Probe(name=PROBE, labels=LABELS, oracle=None, queries=tuple(queries),
                 delivery=delivery, kind="yes-no")


def dialogue(
    questions: Sequence[str],
    answers: Sequence[str] | None = None,
    *,
    readout: Literal["mcq", "yes-no"] = "mcq",
) -> tuple[Message, ...]:
    """The within-dialogue context after ``questions`` were asked and answered.

    Each question is asked in the first answer order of ``readout``; the
    assistant's reply is ``answers[i]`` when given (e.g. the model's own greedy
    answer), else :data:`PLACEHOLDER_ANSWER`. The statements made so far are the context's
    evidence: question ``i`` (and the model's own answer to it) is marked as turn
    ``i + 1``'s.
    """
    if answers is not None and len(answers) != len(questions):
        raise ValueError("dialogue needs one answer per question")
    out: list[Message] = []
    for i, q in enumerate(questions):
        asked = mcq_text(question_text(q), LABELS) if readout == "mcq" else yes_no_text(q, 0)
        out.append(Message.of("user", Marked(asked, "evidence", i + 1)))
        out.append(Message("assistant", PLACEHOLDER_ANSWER) if answers is None else
                   Message.of("assistant", Marked(answers[i], "evidence", i + 1)))
    return tuple(out)


@register
class DutchBook(Configured[DutchBookParams], GeneratorBinding):
    """Coherence of credences: normalisation, monotonicity and extensionality scenarios.

    Each episode asks one scenario's questions, one per turn, as Yes/No MCQs in a
    fresh chat (``single-turn``) or within one dialogue (``multi-turn``). There is
    no oracle: coherence is judged by the Dutch book on the read credences.

    Parameters are the fields of its ``Params`` record. Its probe ``credence`` (Yes, No) has
    no oracle; beliefs have dims ``(delivery, probe, episode, turn, outcome)``.

    Examples:
        >>> env = belieflens.envs.get("dutch-book")
        >>> episode = next(env.episodes(1, seed=0))
        >>> probe = episode.turns[1].probes[0]
        >>> probe.name, probe.labels, probe.oracle
        ('credence', ('Yes', 'No'), None)
    """

    name = "dutch-book"
    Params = DutchBookParams
    sections: ClassVar[tuple[SectionFn, ...]] = (dutch_book_section,)
    """Sections of ``belieflens analyze`` for this environment."""

    def __init__(self, params: DutchBookParams) -> None:
        self._params = params
        pool = shipped_scenarios() if params.questions is None else load_scenarios(
            params.questions
        )
        self._scenarios = tuple(s for s in pool if params.kind in ("all", s.kind))
        if not self._scenarios:
            raise bad("kind", params.kind, "a kind present in the scenario set")

    @property
    def requires_generator(self) -> bool:
        """Whether the dialogue needs the model's own answers (``answers=model``, multi-turn)."""
        return self._params.answers == "model" and "multi-turn" in self._params.deliveries

    def own_answers(self, questions: Sequence[str], seed: int) -> list[str]:
        """The bound generator's greedy replies, each asked after the earlier ones."""
        gen = require_generator("answers=model", self._generator, self.name)
        answers: list[str] = []
        for t, q in enumerate(questions):
            context = dialogue(questions[:t], answers, readout=self._params.readout)
            asked = (mcq_text(question_text(q), LABELS) if self._params.readout == "mcq"
                     else yes_no_text(q, 0))
            answers.append(gen(append_user(context, asked), seed=derive_seed(seed, t),
                               max_new_tokens=self._params.answer_tokens, temperature=0.0))
        return answers

    @property
    def scenarios(self) -> tuple[Scenario, ...]:
        """The scenarios episodes draw from (after the ``kind`` filter)."""
        return self._scenarios

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``n`` episodes, one scenario each.

        Scenarios are visited in a seeded permutation (``default_rng([seed, 2**31 + b])``
        for block ``b``), a fresh one every ``len(scenarios)`` episodes; episode ``i``
        shuffles its questions (``order="shuffled"``) with ``default_rng([seed, i])``.
        """
        for job in self.episode_jobs(n, seed):
            yield from job

    def episode_jobs(self, n: int, seed: int) -> list[Iterator[Episode]]:
        """One job per episode (:meth:`episodes`): episodes share nothing, so those whose
        answers are the model's may run together, their generations batched."""
        if self.requires_generator:
            require_generator("answers=model", self._generator, self.name)
        count = len(self._scenarios)
        perm = np.arange(0)
        jobs = []
        for i in range(n):
            if i % count == 0:
                perm = np.random.default_rng([seed, 2**31 + i // count]).permutation(count)
            jobs.append(self._job(i, self._scenarios[int(perm[i % count])], seed))
        return jobs

    def _job(self, index: int, scenario: Scenario, seed: int) -> Iterator[Episode]:
        yield self._episode(index, scenario, np.random.default_rng([seed, index]), seed)

    def _episode(
        self, index: int, scenario: Scenario, rng: np.random.Generator, seed: int = 0
    ) -> Episode:
        p = self._params
        m = len(scenario.questions)
        order = list(range(m)) if p.order == "listed" else [int(x) for x in rng.permutation(m)]
        asked = [scenario.questions[j] for j in order]
        own = self.own_answers(asked, derive_seed(seed, index)) if self.requires_generator else None
        turns = []
        for t in range(m):
            messages: dict[Delivery, tuple[Message, ...]] = {
                "single-turn": (),
                "multi-turn": dialogue(asked[:t], None if own is None else own[:t],
                                       readout=p.readout),
            }
            probes: list[Probe] = [
                mcq_probe(PROBE, messages[d], question_text(asked[t]), LABELS, None, d)
                if p.readout == "mcq" else yes_no_probe(messages[d], asked[t], d)
                for d in p.deliveries
            ]
            turns.append(
                Turn(
                    index=t,
                    observation=asked[t - 1] if t else "",
                    messages={d: messages[d] for d in p.deliveries},
                    probes=tuple(probes),
                )
            )
        truth: dict[str, float | str] = {
            "scenario": scenario.id,
            "kind": scenario.kind,
            "domain": scenario.domain,
            "order": ",".join(str(j) for j in order),
            "answers": p.answers,
        }
        return Episode(index=index, turns=tuple(turns), truth=truth)
