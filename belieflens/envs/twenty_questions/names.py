"""Whether a name names the secret animal of ``twenty-questions``: one matcher for the guess
rule (:func:`~.answers.parse_answer`) and the posterior mass on the secret
(:func:`~.bayes.mass_on`).

A name is compared by its **key**: lower case, accents folded (``Vicuña`` is ``vicuna``),
anything but letters and digits a space (``Aye-aye`` is ``aye aye``), a leading article
dropped, and each word's plural removed (``zebras``, ``butterflies``, ``foxes``,
``albatrosses``, ``platypuses``). Two keys are compared word by word, and as one joined word
(``leafcutter ant`` and ``leaf cutter ant``). :func:`match` says how a name names the secret:

- ``"name"``: its key is the secret's or one of the secret's aliases (:data:`ALIASES`: a small
  table of the other names of the paper's 40 animals, e.g. ``Saiga`` for ``Saiga antelope``,
  ``Grizzly bear`` for ``Brown bear``, ``Fruit bat`` for ``Flying fox``);
- ``"head"``: it is shorter than the secret's own name and its words are among that name's,
  the head noun (the last word) included: ``Elephant`` for ``African elephant``, ``Owl`` for
  ``Snowy owl`` (an alias's head noun is not the secret's: ``Dog`` does not name the dhole,
  the Asian wild dog). A head noun that names another kind of animal (a flying fox is a bat,
  a horseshoe crab no crab, an electric eel no eel: :data:`MISLEADING_HEAD`) does not name
  the secret;
- ``None``: any other name (``Asian elephant`` for ``African elephant``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Final, Literal

Naming = Literal["name", "head"]
"""How a name names the secret (module docstring)."""

ALIASES: Final[Mapping[str, tuple[str, ...]]] = {
    "Coyote": ("prairie wolf",),
    "Rhinoceros beetle": ("rhino beetle", "hercules beetle", "atlas beetle"),
    "Wolverine": ("glutton", "skunk bear"),
    "Saiga antelope": ("saiga",),
    "Yak": ("wild yak", "domestic yak"),
    "Kiwi": (),
    "Zebra": ("plains zebra",),
    "Golden jackal": ("common jackal", "asiatic jackal"),
    "Horseshoe crab": ("atlantic horseshoe crab",),
    "Sand cat": ("sand dune cat",),
    "European Badger": ("eurasian badger", "badger"),
    "Blue dragon sea slug": ("blue dragon", "blue sea slug", "sea swallow", "blue glaucus",
                             "glaucus atlanticus"),
    "Cassowary": ("southern cassowary",),
    "Electric eel": (),
    "Flying fox": ("fruit bat", "megabat"),
    "Giraffe": ("camelopard",),
    "Hammerhead shark": ("hammerhead", "great hammerhead"),
    "Vicuña": ("vicugna",),
    "Ibex": ("alpine ibex", "steinbock"),
    "Aye-aye": ("ayeaye",),
    "Scarlet macaw": ("red macaw",),
    "Peregrine falcon": ("peregrine",),
    "Wildebeest": ("gnu",),
    "Capybara": ("capibara",),
    "Sea otter": (),
    "Leafcutter ant": ("leaf cutting ant",),
    "African elephant": ("african bush elephant", "savanna elephant", "african forest elephant"),
    "Rosy boa": (),
    "Quetzal": ("resplendent quetzal", "quetzales"),
    "Snowy owl": ("arctic owl",),
    "Jerboa": (),
    "Gharial": ("gavial", "fish eating crocodile"),
    "Albatross": ("wandering albatross",),
    "Dhole": ("asian wild dog", "indian wild dog"),
    "Kookaburra": ("laughing kookaburra",),
    "Monarch butterfly": ("monarch",),
    "Uakari": ("bald uakari",),
    "Bottlenose dolphin": ("bottle nosed dolphin",),
    "Platypus": ("duck billed platypus", "duckbill"),
    "Brown bear": ("grizzly bear", "grizzly", "kodiak bear"),
}
"""Other names of the paper's 40 animals (App. F.2.6), by the paper's spelling."""

MISLEADING_HEAD: Final = frozenset({"flying fox", "horseshoe crab", "electric eel"})
"""Keys of animals whose head noun names another kind of animal (a guess of it is no guess of
them)."""

_ARTICLES = frozenset({"a", "an", "the"})
_SIBILANT_PLURAL = re.compile(r"(?:ss|x|ch|sh|z|us)es$")


def singular(word: str) -> str:
    """``word`` without a plural ending; the same key for a noun's singular and plural.

    Examples:
        >>> [singular(w) for w in ("zebras", "butterflies", "foxes", "albatrosses", "platypus",
        ...                        "platypuses", "ibex", "boas")]
        ['zebra', 'butterfly', 'fox', 'albatross', 'platypu', 'platypu', 'ibex', 'boa']
    """
    if _SIBILANT_PLURAL.search(word) and len(word) > 4:
        word = word[:-2]
    elif len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def key(name: str) -> tuple[str, ...]:
    """The words a name is compared by (module docstring)."""
    decomposed = unicodedata.normalize("NFKD", name)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    words = re.sub(r"[^a-z0-9]+", " ", plain).split()
    while words and words[0] in _ARTICLES:
        words = words[1:]
    return tuple(singular(w) for w in words)


def _names_of(secret: str) -> list[tuple[str, ...]]:
    """The keys of the secret's name and of its aliases."""
    table = {key(a): aliases for a, aliases in ALIASES.items()}
    own = key(secret)
    return [own, *(key(a) for a in table.get(own, ()))]


def _same(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return bool(a) and (a == b or "".join(a) == "".join(b))


def match(name: str, secret: str) -> Naming | None:
    """How ``name`` names ``secret``: ``"name"``, ``"head"`` or ``None`` (module docstring).

    Examples:
        >>> [match(n, "African elephant") for n in ("african elephants", "Elephant",
        ...                                         "Asian elephant", "")]
        ['name', 'head', None, None]
        >>> match("Vicuna", "Vicuña"), match("Saiga", "Saiga antelope"), match("Fox", "Flying fox")
        ('name', 'name', None)
    """
    k = key(name)
    if not k or not key(secret):
        return None
    names = _names_of(secret)
    if any(_same(k, n) for n in names):
        return "name"
    own = names[0]
    head = (" ".join(own) not in MISLEADING_HEAD and len(k) < len(own) and k[-1] == own[-1]
            and set(k) <= set(own))
    return "head" if head else None


def names_secret(name: str, secret: str) -> bool:
    """Whether ``name`` names ``secret`` at all (:func:`match` is not ``None``)."""
    return match(name, secret) is not None
