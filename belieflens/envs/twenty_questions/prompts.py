"""The prompts of ``twenty-questions`` and the parsing of generated text.

The system prompts, the guess question ``Is it X?`` and the result ``Correct!`` are quoted from
From Prompts to Posteriors, App. F.2.2, F.2.4 and F.2.5. The paper's user prompts are not in its
text, so the user turns below are the project's own, written to ask exactly what each appendix
section says is asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from belieflens.episodes.base import Marked, Message, Query, marked
from belieflens.episodes.questions import DEFAULT_PREFILL

JUDGE_SYSTEM = (
    "You are playing a game of 20 Questions trying to guess an animal. After asking Yes/No "
    "questions and receiving answers, you will be prompted to judge whether a given animal fits "
    "the questions and answers."
)
"""System prompt of the compatibility judgement (paper, App. F.2.2)."""

QUESTIONS_SYSTEM = (
    "You are playing a game of 20 Questions to guess an animal. When asked, you must produce "
    "Yes/No questions. You must not add any explanation or extra text; only return the strict "
    "format requested by the user."
)
"""System prompt of candidate-question generation (paper, App. F.2.4)."""

ANSWERER_SYSTEM = "You are playing the answerer in a game of 20 Questions. Your chosen entity is:"
"""System prompt of the answerer, followed by the entity (paper, App. F.2.5)."""

HYPOTHESES_SYSTEM = (
    "You are playing a game of 20 Questions to guess an animal. When asked, you must name "
    "candidate animals. You must not add any explanation or extra text; only return the strict "
    "format requested by the user."
)
"""System prompt of hypothesis generation (Θ0, Θ_new): the project's own, after F.2.4's."""

CORRECT = "Correct!"
"""The answerer's result when the question guesses the entity; it ends the run (F.2.5)."""

YES, NO = "Yes", "No"
"""The two outcomes of a question; outcome 0 is Yes."""

HEDGE = "Partly"
"""The answer recorded for a hedge (``Sort of.``, ``Sometimes.``): neither Yes nor No, an
answer every hypothesis explains alike (:func:`~.bayes.likelihood`)."""

OPTIONS = (" Yes", " No")
"""Continuations of the prefill read at every Yes/No read-out (outcomes 0, 1)."""

def guess(animal: str) -> str:
    """The guess question asked once |Θk| ≤ 2 (paper, F.2.4): ``Is it X?``."""
    return f"Is it {animal}?"


def answerer_system(animal: str) -> str:
    """The answerer's system prompt with its chosen entity."""
    return f"{ANSWERER_SYSTEM} {animal}"


def history_text(history: Sequence[tuple[str, str]]) -> str:
    """The questions asked so far and their answers, one numbered line each."""
    return marked(*history_pieces(history))[0]


def history_pieces(history: Sequence[tuple[str, str]]) -> list[str | Marked]:
    """:func:`history_text` as pieces: each question and its answer marked as the evidence of
    its turn."""
    if not history:
        return ["(none yet)"]
    out: list[str | Marked] = []
    for i, (q, a) in enumerate(history, start=1):
        out += ["\n" if i > 1 else "", f"{i}. ", Marked(f"{q} {a}", "evidence", i)]
    return out


def hypotheses_prompt(history: Sequence[tuple[str, str]], n: int) -> tuple[Message, ...]:
    """Ask for ``n`` candidate animals: Θ0 (empty history) or Θ_new (conditioned on it)."""
    if history:
        user = (f"Questions asked so far and their answers:\n{history_text(history)}\n\n"
                f"Name {n} different animals that fit all of these answers.")
    else:
        user = f"Name {n} different animals that could be the secret animal."
    user += " Return one animal per line and nothing else."
    return (Message("system", HYPOTHESES_SYSTEM), Message("user", user))


def questions_prompt(
    hypotheses: Sequence[str], history: Sequence[tuple[str, str]], n: int
) -> tuple[Message, ...]:
    """Ask for ``n`` candidate Yes/No questions, conditioned on Θk and the history (F.2.4)."""
    pool = ", ".join(hypotheses) if hypotheses else "(none yet)"
    user = (f"Animals that are still possible: {pool}\n"
            f"Questions asked so far and their answers:\n{history_text(history)}\n\n"
            f"Write {n} different Yes/No questions that best split the possible animals. "
            "Return one question per line and nothing else.")
    return (Message("system", QUESTIONS_SYSTEM), Message("user", user))


def answer_prompt(animal: str, question: str) -> tuple[Message, ...]:
    """The answerer's prompt: its entity, the question, the allowed results (F.2.5)."""
    user = (f"{question}\nAnswer Yes or No. If the question guesses your entity exactly, "
            f"answer {CORRECT}")
    return (Message("system", answerer_system(animal)), Message("user", user))


def compat_query(animal: str, history: Sequence[tuple[str, str]]) -> Query:
    """The read-out of θ's compatibility with the history h_{1:k} (F.2.2): P(Yes); each
    question and answer of the history is marked as its turn's evidence."""
    user = Message.of("user", "Questions asked so far and their answers:\n",
                      *history_pieces(history),
                      f"\n\nDoes the animal {animal} fit all of these questions and answers? "
                      "Answer Yes or No.")
    return Query(messages=(Message("system", JUDGE_SYSTEM), user),
                 prefill=DEFAULT_PREFILL, options=OPTIONS, outcome=(0, 1))


def likelihood_query(animal: str, question: str) -> Query:
    """The read-out of p(y | θ, ξ) (F.2.3): the answerer with entity θ asked ξ, P(Yes)."""
    user = f"{question}\nAnswer Yes or No."
    return Query(messages=(Message("system", answerer_system(animal)), Message("user", user)),
                 prefill=DEFAULT_PREFILL, options=OPTIONS, outcome=(0, 1))


_BULLET = re.compile(r"^\s*(?:[-*•]+|\(?\d+[.):]|[A-Za-z][.)])\s*")


def _lines(text: str) -> list[str]:
    """Non-empty lines of ``text`` with list bullets / numbering removed."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        while (stripped := _BULLET.sub("", line, count=1).strip()) != line:
            line = stripped  # e.g. "1. 1. Zebra"
        if line:
            out.append(line)
    return out


def parse_hypotheses(text: str, *, max_chars: int) -> list[str]:
    """Animal names in a generated list: one per line (commas also split), stripped of bullets
    and trailing punctuation, beliefs over ``max_chars`` characters dropped (F.2.1), first
    spelling of each name kept (case-insensitive)."""
    out: list[str] = []
    seen: set[str] = set()
    for line in _lines(text):
        for part in line.split(","):
            name = part.strip().strip(".;:!\"'").strip()
            if not name or len(name) > max_chars or name.casefold() in seen:
                continue
            seen.add(name.casefold())
            out.append(name)
    return out


def parse_questions(text: str, n: int) -> list[str]:
    """Up to ``n`` distinct candidate questions in generated text, one per non-empty line (the
    paper restricts neither their form nor their length)."""
    out: list[str] = []
    seen: set[str] = set()
    for line in _lines(text):
        if line.casefold() in seen:
            continue
        seen.add(line.casefold())
        out.append(line)
        if len(out) == n:
            break
    return out


_GUESS = re.compile(
    r"^\s*(?:is it|is this|could it be|are you(?: thinking of)?"
    r"|is the (?:secret )?(?:animal|entity)|is your (?:secret )?(?:animal|entity))\s+"
    r"(?:an?\s+|the\s+)?(?P<name>[^?]+?)\s*\?+\s*$",
    re.IGNORECASE)
"""A guess: ``Is it X?`` (and its variants), ``X`` the guessed name."""


def guessed_name(question: str) -> str | None:
    """The name a guess question guesses (``Is it a zebra?``: ``zebra``), else ``None``."""
    m = _GUESS.match(question)
    return None if m is None else m["name"]
