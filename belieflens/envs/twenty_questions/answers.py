"""Reading the ``twenty-questions`` answerer's reply: ``Yes``, ``No``, a hedge (``Partly``) or
``Correct!``, and whether the reply states a result at all.

**The result a reply states** is read from its first result expression (text in quotes is
skipped: it restates the question):

- an *affirmation*: ``yes``, ``yeah``, ``yep``, ``true``, ``you bet``,
  ``without a doubt``, and the words that also identify a guessed animal: ``correct``,
  ``right``, ``exactly``, ``precisely``, ``bingo``, ``spot on``, ``that's it``, ``you got it``,
  ``you guessed it``;
- a *denial*: ``no``, ``nope``, ``nah``, ``false``, ``incorrect``, ``wrong``, ``never``,
  ``hardly``, ``not at all``, ``not really``, ``not quite``, ``no way``, ``by no means``;
- a *hedge* (the attribute holds in part or at times; neither Yes nor No): ``sort of``,
  ``kind of``, ``sometimes``, ``partly``, ``somewhat``, ``occasionally``, ``it depends``,
  ``more or less``, ``to some extent``, ``in a way``, ``not always``, ``not necessarily``,
  ``not entirely``, ``usually``, ``mostly``, ``rarely``, ``yes and no``;
- an *intensifier* (``of course``, ``absolutely``, ``certainly``, ``definitely``,
  ``indeed``, ``surely``, ``sure``, ``totally``, ``undoubtedly``, ``clearly``) that leads its
  clause (``Indeed it does``, ``It certainly can't``; not ``Zebra is indeed a creature``): an
  affirmation, unless a negation follows it in its clause (``Certainly not.``, ``It
  certainly can't.``, ``Indeed not.``).

**Negation scope**: an affirmation or denial is negated when ``not``, ``never``, ``hardly``,
``nor`` or a word ending in ``n't`` stands among the three words before it in its clause
(``Not exactly.``, ``That isn't true.``, ``I wouldn't say that's correct.``); a negated
affirmation is a denial, a negated denial (``not wrong``) an affirmation. Uncertainty is no
result (``I'm not sure``, ``I don't know``, ``maybe``): reading goes on past it. A reply with
no result expression is read from a restatement of the question in its first sentence
(``It does not have stripes.``: No). Anything else (empty, a restated question, off the
point) reads as ``No`` and is recorded as not valid.

**Correct!** (the game ends, From Prompts to Posteriors App. F.2.5) needs a guess (``Is it
X?``) whose ``X`` names the secret (:func:`~.names.match`):

- by name (its name, an alias, another spelling or the plural): any affirmation confirms it,
  and so does a sentence of the reply that names the secret as its entity (``No, my entity
  is a capybara.``);
- by its head noun only (``Is it an elephant?`` for ``African elephant``): the answerer
  decides, as F.2.5 trusts it: a reply that identifies the guess (``Correct!``, ``You got
  it``, ``That's it``) or names the secret itself ends the game; a plain ``Yes`` says the
  secret is an elephant, not which one, and is a ``Yes``.

An affirmation of any other question is ``Yes`` (``Yes, that's correct.`` to ``Is it a
mammal?``, ``Correct!`` to a guess of another animal).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final, Literal

from belieflens.envs.twenty_questions.names import match, singular
from belieflens.envs.twenty_questions.prompts import CORRECT, HEDGE, NO, YES, guessed_name

Stated = Literal["yes", "no", "hedge"]
"""A result expression's class."""

_STRONG: Final = (r"correct|right|exactly|precisely|bingo|spot on|that'?s it|that is it"
                  r"|you(?:'ve| have)? got it|you guessed it|got it|nailed it")
_AFFIRM: Final = (r"yes|yeah|yep|yup|true|affirmative|you bet|without a doubt"
                  r"|no doubt|sure thing")
_DENY: Final = (r"not at all|not really|not quite|not even close|not in the slightest"
                r"|no way|by no means|nope|nah|no|false|incorrect|wrong|never|hardly|negative")
_HEDGE: Final = (r"yes and no|sort of|kind of|kinda|sorta|sometimes|at times|partly|partially"
                 r"|somewhat|occasionally|it depends|depends|more or less|to some extent"
                 r"|to an extent|to a degree|in a way|in some ways|not always|not necessarily"
                 r"|not entirely|not completely|not usually|usually|mostly|generally|often"
                 r"|rarely|seldom")
_INTENSIFIER: Final = (r"of course|absolutely|certainly|definitely|indeed|surely|sure|totally"
                       r"|undoubtedly|clearly|obviously|naturally")
_UNSURE: Final = (r"not sure|unsure|not certain|uncertain|(?:do not|don't|dont) know|no idea"
                  r"|(?:can't|cannot|can not) (?:say|tell)|maybe|perhaps|possibly")

RESULT: Final = re.compile(
    rf"(?<![\w'])(?:(?P<unsure>{_UNSURE})|(?P<hedge>{_HEDGE})|(?P<strong>{_STRONG})"
    rf"|(?P<affirm>{_AFFIRM})|(?P<deny>{_DENY})|(?P<intens>{_INTENSIFIER}))(?![\w'])",
    re.IGNORECASE)
"""The result expressions, in the order they are tried at one place (module docstring)."""

_CLAUSE_END: Final = re.compile(r"[.!?;,:\n]|\bbut\b|\balthough\b|\bthough\b")

_NEGATORS: Final = frozenset(("not", "never", "hardly", "nor", "cannot"))

_QUOTED: Final = re.compile(r"[\"\u201c][^\"\u201d]*(?:[\"\u201d]|$)")
"""Quoted text (a restated question), closed or running to the end of the reply."""


def _negates(word: str) -> bool:
    w = word.strip(".,;:!?\"'").lower().replace("\u2019", "'")
    return w in _NEGATORS or w.endswith("n't")


def _negated_before(before: str) -> bool:
    """Whether a negator stands among the three words before a place, in its clause."""
    clause = _CLAUSE_END.split(before)[-1]
    return any(_negates(w) for w in clause.split()[-3:])


def _negated_after(after: str) -> bool:
    """Whether a negator follows an intensifier in its clause (``certainly not``, ``it
    certainly can't``)."""
    clause = _CLAUSE_END.split(after, maxsplit=1)[0]
    return any(_negates(w) for w in clause.split()[:3])


_LEAD_WORDS: Final = frozenset((
    "it", "it's", "its", "this", "that", "that's", "is", "does", "do", "can", "will", "would",
    "oh", "well", "yes", "yeah", "i", "i'm", "am", "most", "quite", "very", "they", "he",
    "she", "it'll"))
"""Words that may stand before an intensifier in its clause (``It certainly can't``, ``Oh,
absolutely``), where it states the result."""


def _leads(before: str) -> bool:
    """Whether an intensifier leads its clause: only :data:`_LEAD_WORDS` before it there."""
    clause = _CLAUSE_END.split(before)[-1].lower().replace("\u2019", "'")
    return all(w.strip("\"'") in _LEAD_WORDS for w in clause.split())


def stated(text: str) -> tuple[Stated, bool] | None:
    """The result ``text`` states and whether it identifies a guess (a strong affirmation),
    from its first result expression (module docstring), else ``None``.

    Examples:
        >>> [stated(t) for t in ("Not exactly.", "Absolutely!", "Certainly not.", "Sometimes.",
        ...                      "You got it!", "I'm not sure.")]
        [('no', False), ('yes', False), ('no', False), ('hedge', False), ('yes', True), None]
    """
    for m in RESULT.finditer(text):
        kind = m.lastgroup
        if kind == "unsure":
            continue
        if kind == "hedge":
            return "hedge", False
        if kind == "intens":
            if not _leads(text[: m.start()]):
                continue  # inside a statement (``Zebra is indeed a creature``): no result
            return ("no", False) if _negated_after(text[m.end():]) else ("yes", False)
        negated = _negated_before(text[: m.start()])
        if kind == "deny":
            return ("yes", False) if negated else ("no", False)
        if negated:
            return "no", False
        return "yes", kind == "strong"
    return None


_ASKS: Final = re.compile(r"^\s*(?:is|are|does|do|can|could|has|have|was|will|would)\s+"
                          r"(?:it|the (?:secret )?(?:animal|entity)|your (?:animal|entity))\s+"
                          r"(?P<rest>.+?)\s*\?*\s*$", re.IGNORECASE)
"""An attribute question and what it asks (``Does it live in water?``: ``live in water``)."""

_FUNCTION_WORDS: Final = frozenset((
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or",
    "it", "its", "is", "are", "be", "than", "that", "this", "as", "any", "some", "usually",
    "typically", "often", "normally", "ever", "very", "more", "most"))
"""Words of an attribute question that a restating reply need not repeat."""

_AUX: Final = frozenset(("is", "are", "was", "were", "does", "do", "did", "can", "could", "has",
                         "have", "s", "will", "would"))
"""Verbs after which a restatement's predicate comes (``It does live in water``)."""

_RESTATED_NEGATIONS: Final = frozenset(("not", "never", "no", "cannot", "t"))
"""Words that negate a restatement (``t`` is what is left of ``n't``)."""

_ENTITY: Final = re.compile(
    r"\b(?:it|this|the (?:secret )?(?:animal|entity)|my (?:animal|entity)|my chosen entity)"
    r"\s*(?:is|'s|\u2019s)\s+(?P<neg>not\s+)?(?:an?\s+|the\s+)?(?P<name>[^.,;:!?\n]+)",
    re.IGNORECASE)
"""A sentence naming the entity: ``it is a zebra``, ``my entity is not a capybara``."""

_NAME_END: Final = re.compile(r"\s+(?:and|but|that|which|who|with|from|in|of|as|or)\b",
                              re.IGNORECASE)
"""Where a name after ``it is`` ends (``a zebra and it lives in Africa``)."""


def _plain_words(text: str) -> list[str]:
    """Lower-case words of ``text``, accents folded, anything but letters and digits a space
    (so ``n't`` leaves ``t``); :func:`~.names.singular` of each makes ``lives`` and ``live``
    agree."""
    plain = unicodedata.normalize("NFKD", text.replace("\u2019", "'"))
    plain = "".join(c for c in plain if not unicodedata.combining(c)).casefold()
    return re.sub(r"[^a-z0-9]+", " ", plain).split()


def _restated(text: str, question: str) -> Stated | None:
    """``yes`` / ``no`` when the reply's first sentence restates what an attribute question
    asks (``It does live in water.``, ``The entity is not a mammal.``), else ``None``: every
    word of what it asks (bar function words) is in the sentence after its first verb, as its
    predicate, and the sentence is negated when ``not``, ``never``, ``no`` or ``...n't`` comes
    before the last of them."""
    first = re.split(r"(?<=[.!?])\s|\n", text.strip(), maxsplit=1)[0]
    asked = _ASKS.match(question)
    words = _plain_words(first)
    stems = [singular(w) for w in words]
    if asked is None or not words:
        return None
    need = [singular(w) for w in _plain_words(asked["rest"]) if w not in _FUNCTION_WORDS]
    if not need or any(w not in stems for w in need):
        return None
    verb = next((i for i, w in enumerate(words) if w in _AUX), None)
    first_at = min(stems.index(w) for w in need)
    if first_at < (verb + 1 if verb is not None else 2):  # what it asks must be the predicate
        return None
    last = max(stems.index(w) for w in need)
    return "no" if _RESTATED_NEGATIONS.intersection(words[:last]) else "yes"


def names_entity(text: str, secret: str) -> bool:
    """Whether some sentence of ``text`` says, un-negated, that the answerer's entity is the
    secret by name (``No, my entity is a capybara.``: the answerer's own words name it,
    whatever word came first)."""
    for m in _ENTITY.finditer(text):
        name = _NAME_END.split(m["name"], maxsplit=1)[0]
        if m["neg"] is None and match(name, secret) == "name":
            return True
    return False


def parse_answer(text: str, question: str = "", secret: str = "") -> tuple[str, bool]:
    """The result the answerer's reply to ``question`` states, and whether it states one
    (module docstring): ``Yes``, ``No``, ``Partly`` or ``Correct!``.

    Examples:
        >>> parse_answer("Yes, correct!", "Is it Zebra?", "Zebra")
        ('Correct!', True)
        >>> parse_answer("Correct!", "Is it an elephant?", "African elephant")
        ('Correct!', True)
        >>> parse_answer("Yes.", "Is it an elephant?", "African elephant")
        ('Yes', True)
        >>> parse_answer("Not true.", "Is it a mammal?", "Zebra"), parse_answer("Sort of.")
        (('No', True), ('Partly', True))
        >>> parse_answer("It does not have stripes.", "Does it have stripes?", "Kiwi")
        ('No', True)
        >>> parse_answer("")
        ('No', False)
    """
    plain = _QUOTED.sub(" ", text)
    guessed = guessed_name(question)
    naming = match(guessed, secret) if guessed is not None and secret else None
    if naming is not None and names_entity(plain, secret):
        return CORRECT, True
    said = stated(plain)
    if said is None:
        restated = _restated(plain, question)
        said = None if restated is None else (restated, False)
    if said is None:
        return NO, False
    result, identifies = said
    if result == "hedge":
        return HEDGE, True
    if result == "no":
        return NO, True
    ends = naming == "name" or (naming == "head" and identifies)
    return (CORRECT if ends else YES), True
