"""The prompts of ``twenty-questions`` and the parsing of generated text.

The system prompts, the guess question ``Is it X?`` and the result ``Correct!`` are quoted from
From Prompts to Posteriors, App. F.2.2, F.2.4 and F.2.5. The paper's user prompts are not in its
text, so the user turns below are the project's own, written to ask exactly what each appendix
section says is asked.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from belieflens.episodes.base import Message, Query
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
    if not history:
        return "(none yet)"
    return "\n".join(f"{i}. {q} {a}" for i, (q, a) in enumerate(history, start=1))


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
    """The read-out of θ's compatibility with the history h_{1:k} (F.2.2): P(Yes)."""
    user = (f"Questions asked so far and their answers:\n{history_text(history)}\n\n"
            f"Does the animal {animal} fit all of these questions and answers? "
            "Answer Yes or No.")
    return Query(messages=(Message("system", JUDGE_SYSTEM), Message("user", user)),
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


_DECISIVE = re.compile(
    r"\b(?:(?P<yes>yes|yeah|yep|true|exactly|bingo|indeed it is|you guessed it|you got it)"
    r"|(?P<no>no|nope|false|incorrect|wrong)|(?P<correct>correct|right))\b", re.IGNORECASE)
"""The words that state a result: an affirmation, a denial, or *correct* / *right* (an
affirmation unless negated)."""

_GUESS = re.compile(
    r"^\s*(?:is it|is this|could it be|are you(?: thinking of)?"
    r"|is the (?:secret )?(?:animal|entity)|is your (?:secret )?(?:animal|entity))\s+"
    r"(?:an?\s+|the\s+)?(?P<name>[^?]+?)\s*\?+\s*$",
    re.IGNORECASE)
"""A guess: ``Is it X?`` (and its variants), ``X`` the guessed name."""

_QUOTED = re.compile(r"[\"\u201c][^\"\u201d]*(?:[\"\u201d]|$)")
"""Quoted text (a restated question), closed or running to the end of the reply."""

_ASKS = re.compile(r"^\s*(?:is|are|does|do|can|could|has|have|was|will|would)\s+"
                   r"(?:it|the (?:secret )?(?:animal|entity)|your (?:animal|entity))\s+"
                   r"(?P<rest>.+?)\s*\?*\s*$", re.IGNORECASE)
"""An attribute question and what it asks (``Does it live in water?``: ``live in water``)."""

_FUNCTION_WORDS = frozenset((
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or",
    "it", "its", "is", "are", "be", "than", "that", "this", "as", "any", "some", "usually",
    "typically", "often", "normally", "ever", "very", "more", "most"))
"""Words of an attribute question that a restating reply need not repeat."""


def _simple(text: str) -> str:
    """Lower case, accents removed, anything but letters, digits and spaces made a space."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return " ".join(re.sub(r"[^a-z0-9]+", " ", plain).split())


_AUX = frozenset(("is", "are", "was", "were", "does", "do", "did", "can", "could", "has",
                  "have", "s", "will", "would"))
"""Verbs after which a restatement's predicate comes (``It does live in water``)."""

_NEGATIONS = frozenset(("not", "never", "no", "cannot", "t"))
"""Words that negate a restatement (``t`` is what is left of ``n't``)."""


def _stem(word: str) -> str:
    """A word without its plural or third-person ``s`` (``lives`` and ``live``, ``flies`` and
    ``fly`` agree)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def same_name(a: str, b: str) -> bool:
    """Whether two animal names are one (case, accents, articles and a plural ``s`` aside).

    Examples:
        >>> same_name("a zebra", "Zebra"), same_name("Vicuna", "Vicuña"), same_name("Lion", "Zebra")
        (True, True, False)
    """
    def key(name: str) -> str:
        words = _simple(name).split()
        while words and words[0] in ("a", "an", "the"):
            words = words[1:]
        return " ".join(_stem(w) for w in words)

    return bool(key(a)) and key(a) == key(b)


def guessed_name(question: str) -> str | None:
    """The name a guess question guesses (``Is it a zebra?``: ``zebra``), else ``None``."""
    m = _GUESS.match(question)
    return None if m is None else m["name"]


def guesses(question: str, secret: str) -> bool:
    """Whether ``question`` is a guess that names ``secret`` (the only question a
    confirmation ends the game on)."""
    name = guessed_name(question)
    return name is not None and bool(secret) and same_name(name, secret)


def _negated(before: str) -> bool:
    """Whether one of the last three words before a word negates it (``not``, ``never``,
    ``...n't``)."""
    words = [w.strip(".,;:!?\"'").lower() for w in before.split()[-3:]]
    return any(w in ("not", "never") or w.endswith(("n't", "n\u2019t")) for w in words)


def _stated(text: str) -> str | None:
    """``yes`` / ``no`` from the first word of ``text`` that states a result, else ``None``."""
    for m in _DECISIVE.finditer(text):
        if m["yes"]:
            return "yes"
        if m["no"]:
            return "no"
        return "no" if _negated(text[: m.start()]) else "yes"
    return None


def _restated(text: str, question: str) -> str | None:
    """``yes`` / ``no`` when the reply's first sentence restates what the question asks
    (``It does live in water.``, ``The entity is not a mammal.``), else ``None``.

    A guess is restated as ``it is X`` / ``the animal is X``; any question when every word of
    what it asks (bar function words) is in the sentence after its first verb, as its
    predicate (``Zebra is a creature`` does not confirm ``Is it Zebra?``), and the sentence
    is negated when ``not``, ``never``, ``no`` or ``...n't`` comes before the last of them.
    """
    first = re.split(r"(?<=[.!?])\s|\n", text.strip(), maxsplit=1)[0]
    words = _simple(first).split()
    name = guessed_name(question)
    if name is not None:
        target = re.escape(" ".join(_simple(name).split()))
        m = re.search(r"\b(?:it|this|the (?:secret )?(?:animal|entity)|my (?:animal|entity)) "
                      r"(?:is|s)( not)? (?:an? |the )?" + target + r"s?\b", " ".join(words))
        if m is not None:
            return "no" if m.group(1) else "yes"
    asked = _ASKS.match(question)
    if asked is None or not words:
        return None
    need = [_stem(w) for w in _simple(asked["rest"]).split() if w not in _FUNCTION_WORDS]
    stems = [_stem(w) for w in words]
    if not need or any(w not in stems for w in need):
        return None
    verb = next((i for i, w in enumerate(words) if w in _AUX), None)
    first = min(stems.index(w) for w in need)
    if first < (verb + 1 if verb is not None else 2):  # what it asks must be the predicate
        return None
    last = max(stems.index(w) for w in need)
    return "no" if _NEGATIONS.intersection(words[:last]) else "yes"


def _named_entity(text: str, question: str) -> bool:
    """Whether some sentence of ``text`` says, un-negated, that the entity is the name the
    guess ``question`` guesses (``No, my entity is a capybara.``: the answerer's own words
    name its entity, whatever word came first)."""
    return any(_restated(s, question) == "yes"
               for s in re.split(r"(?<=[.!?])\s+|\n+|,\s*", text) if s.strip())


def parse_answer(text: str, question: str = "", secret: str = "") -> tuple[str, bool]:
    """The result the answerer's reply to ``question`` states, and whether it states one.

    ``Correct!`` (the game ends, F.2.5) only when ``question`` is a guess that names
    ``secret`` (:func:`guesses`: ``Is it Zebra?``, ``Is it a zebra?``) and the reply confirms
    it: ``Yes``, ``Correct!``, ``True``, ``You guessed it``, ``It is a zebra`` (a sentence that
    names the entity as the guessed animal confirms it whatever came first: ``No, my entity
    is a capybara.``). A confirmation
    of any other question is ``Yes`` (``Yes, that's correct.`` to ``Is it a mammal?``, and to
    a guess naming another animal). The first word that states a result decides: *yes*,
    *yeah*, *true*, *you guessed it* affirm; *no*, *false*, *incorrect*, *wrong* deny;
    *correct* and *right* affirm unless negated (``not correct``, ``isn't right``). A reply
    with none of them is read from a restatement of the question in its first sentence
    (:func:`_restated`: ``It does not have stripes.`` is ``No``). Anything else (empty, a
    restated question, off the point) reads as ``No`` with ``False``; text in quotes is
    ignored (it restates the question).

    Examples:
        >>> parse_answer("Yes, correct!", "Is it Zebra?", "Zebra")
        ('Correct!', True)
        >>> parse_answer("Yes, that's correct.", "Is it a mammal?", "Zebra")
        ('Yes', True)
        >>> parse_answer("It does not have stripes.", "Does it have stripes?", "Kiwi")
        ('No', True)
        >>> parse_answer("That's not correct.", "Is it Lion?", "Zebra"), parse_answer("")
        (('No', True), ('No', False))
    """
    plain = _QUOTED.sub(" ", text)
    secret_guess = guesses(question, secret)
    if secret_guess and _named_entity(plain, question):
        return CORRECT, True
    said = _stated(plain)
    if said is None:
        said = _restated(plain, question)
    if said is None:
        return NO, False
    if said == "no":
        return NO, True
    return (CORRECT if secret_guess else YES), True
