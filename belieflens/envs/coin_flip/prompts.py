"""The coin flip's texts: how the coin, its stated prior, its swaps, the flips and the reports
are told, and the belief questions, in two wordings.

Everything here is plain text built from an episode's :class:`Setting`; the default setting
(faces ``heads``/``tails``, nothing stated, ``standard`` wording) gives the environment's
original prompts word for word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from belieflens.episodes.base import Marked

Wording = Literal["standard", "paraphrase"]
"""The template family: the original texts, or a paraphrase of every sentence."""

PriorForm = Literal["share", "counts"]
"""How a stated prior is told: the first face's average share and its worth in flips, or the
flips of each face it is worth, as if already seen."""

WORD_LISTS: dict[str, tuple[str, ...]] = {
    "a": ("lamp", "river", "apple", "chair", "cloud", "drum", "forest", "hammer", "kettle",
          "lemon", "mirror", "needle", "pillow", "rocket", "saddle", "tiger", "violin",
          "window", "basket", "candle", "garden", "helmet", "ladder", "magnet", "onion",
          "pepper", "rabbit", "spoon", "tunnel", "wagon"),
    "b": ("anchor", "bridge", "carrot", "desert", "eagle", "feather", "guitar", "harbor",
          "island", "jacket", "kitten", "lantern", "marble", "napkin", "orange", "pencil",
          "quilt", "ribbon", "shovel", "teapot", "umbrella", "valley", "walnut", "button",
          "castle", "dolphin", "engine", "falcon", "glove", "hollow"),
}
"""Disjoint lists the faces of ``sides=random`` are drawn from (two distinct words an
episode): a model taught on one list can be read on names it never saw on the other."""

OBSERVERS: tuple[str, ...] = ("Ann", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana",
                              "Ivo", "Jill", "Kofi", "Lena", "Milo", "Nia", "Omar", "Pia")
"""Names of the observers of ``reports=noisy``."""


@dataclass(frozen=True)
class Setting:
    """What an episode's texts state: the faces, the prior, the swaps, the reports.

    Attributes:
        faces: the names of the first face (outcome 0) and the second.
        prior: ``(mean, weight)`` of a stated prior (the first face's average share and its
            worth in flips), or ``None`` when the prior is not stated.
        hazard: the stated chance of a swap before each flip after the first (0: none).
        noisy: whether observers report the flips.
        wording: the template family.
        prior_form: how a stated prior is told.
    """

    faces: tuple[str, str] = ("heads", "tails")
    prior: tuple[float, float] | None = None
    hazard: float = 0.0
    noisy: bool = False
    wording: Wording = "standard"
    prior_form: PriorForm = "share"

    @property
    def default_faces(self) -> bool:
        """Whether the faces are the coin's own (heads, tails)."""
        return self.faces == ("heads", "tails")


def percent(x: float) -> str:
    """``x`` as a percentage with no more digits than it needs (0.35 -> ``35%``)."""
    return f"{round(x * 100, 6):g}%"


def number(x: float) -> str:
    """``x`` with no more digits than it needs (8.0 -> ``8``)."""
    return f"{x:g}"


def intro(s: Setting) -> str:
    """The opening message: the coin, and what is stated about its prior, swaps and reports."""
    f0, f1 = s.faces
    if s.wording == "paraphrase":
        coin = ("Here is a coin of unknown bias" if s.default_faces else
                f"Here is a coin whose sides are named {f0} and {f1}, and its bias is unknown")
        text = (f"{coin}: neither of us knows how likely it is to come up {f0}. I'll toss it "
                "a number of times and report each outcome.")
    else:
        coin = ("I have a coin that may be biased" if s.default_faces else
                f"I have a coin whose two faces are called {f0} and {f1}. It may be biased")
        text = (f"{coin}: its probability of landing {f0} is unknown to both of us. I will "
                "flip it and tell you the results.")
    return text + "".join(f" {x}" for x in _statements(s))


def flip_word(s: Setting) -> str:
    """What one throw of the coin is called in this wording."""
    return "toss" if s.wording == "paraphrase" else "flip"


def _statements(s: Setting) -> list[str]:
    flip = flip_word(s)
    flips = "tosses" if flip == "toss" else "flips"
    out = []
    if s.prior is not None:
        out.append(_prior_statement(s, *s.prior))
    if s.hazard > 0:
        out.append(f"Before each {flip} after the first, there is a {percent(s.hazard)} chance "
                   "that I swap the coin for another one from the same batch, without telling "
                   "you.")
    if s.noisy:
        out.append(f"I do not see the {flips} myself: each result is reported by an observer, "
                   "who also says how often they are right.")
    return out


def _prior_statement(s: Setting, mean: float, weight: float) -> str:
    f0, f1, flip = *s.faces, flip_word(s)
    if s.prior_form == "counts":
        a, b = round(mean * weight, 12), round((1.0 - mean) * weight, 12)
        return (f"What we know in advance about coins from its batch is worth as much as having "
                f"already seen this coin land {f0} {_times(a)} and {f1} {_times(b)}.")
    flips = "tosses" if flip == "toss" else "flips"
    return (f"What we know in advance: coins from its batch land {f0} {percent(mean)} of the "
            f"time on average, and that knowledge is worth as much as {number(weight)} "
            f"{flips if weight != 1 else flip} of this coin.")


def _times(x: float) -> str:
    return "once" if x == 1 else f"{number(x)} times"


def report_text(s: Setting, face: int, observer: str = "", reliability: float = 1.0) -> str:
    """One flip as told: its face, or an observer's report of it."""
    name = s.faces[0] if face == 1 else s.faces[1]
    if not s.noisy:
        return name
    return f"{observer} (right {percent(reliability)} of the time) says {name}"


def reports_marked(texts: Sequence[str], per_turn: int, first_turn: int, sep: str
                   ) -> list[str | Marked]:
    """The reports' texts with each turn's reports marked as that turn's evidence."""
    out: list[str | Marked] = []
    for k in range(0, len(texts), per_turn):
        if k:
            out.append(sep)
        out.append(Marked(sep.join(texts[k : k + per_turn]), "evidence",
                          first_turn + k // per_turn))
    return out


def separator(s: Setting) -> str:
    """What separates reports in one message."""
    return "; " if s.noisy else ", "


def summary(s: Setting, faces: Sequence[int]) -> str:
    """The single-turn count of what was told so far."""
    h, n = sum(faces), len(faces)
    f0, f1 = s.faces
    if s.noisy:
        say = {1: "says"}
        return (f"({n} report{'' if n == 1 else 's'} so far: {h} {say.get(h, 'say')} {f0}, "
                f"{n - h} {say.get(n - h, 'say')} {f1})")
    unit = "tosses" if flip_word(s) == "toss" else "flips"
    return f"({n} {unit} so far: {h} {f0}, {n - h} {f1})"


def results_lead(s: Setting, multi: bool) -> str:
    """What precedes the reports: a turn's message (``multi``) or the single-turn list."""
    if s.wording == "paraphrase":
        return "Outcome: " if multi else "Outcomes so far: "
    return "Result: " if multi else "The results so far: "


def nothing_yet(s: Setting) -> str:
    """The single-turn text before any flip."""
    return "No tosses yet." if s.wording == "paraphrase" else "No flips yet."


def next_flip_question(s: Setting) -> str:
    """The next-flip belief question."""
    if s.wording == "paraphrase":
        return "Which side do you expect the next toss to show?"
    return "What do you think the next flip will be?"


def bias_question(s: Setting) -> str:
    """The bias belief question (of the coin now in use, where it may have been swapped)."""
    f0 = s.faces[0]
    coin = "the coin now in use" if s.hazard > 0 else "the coin"
    if s.wording == "paraphrase":
        return f"Which interval most likely holds the chance that {coin} comes up {f0}?"
    if s.hazard > 0:
        return f"Which range most likely contains the probability that {coin} lands {f0}?"
    return f"Which range most likely contains the coin's probability of landing {f0}?"
