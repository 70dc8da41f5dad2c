"""One matcher of names for the guess rule and the mass on the secret: accents, plurals,
aliases and the head noun, never another animal."""

from __future__ import annotations

import numpy as np
import pytest

from belieflens.envs.twenty_questions.animals import shipped_animals
from belieflens.envs.twenty_questions.answers import parse_answer
from belieflens.envs.twenty_questions.bayes import HEDGED, likelihood, mass_on, oracle_posterior
from belieflens.envs.twenty_questions.names import ALIASES, key, match


@pytest.mark.parametrize(("name", "secret", "naming"), [
    ("Vicuna", "Vicuña", "name"),
    ("vicuñas", "Vicuña", "name"),
    ("Saiga", "Saiga antelope", "name"),
    ("saiga antelopes", "Saiga antelope", "name"),
    ("Aye aye", "Aye-aye", "name"),
    ("leaf-cutter ants", "Leafcutter ant", "name"),
    ("Grizzly bear", "Brown bear", "name"),
    ("the Platypuses", "Platypus", "name"),
    ("Albatrosses", "Albatross", "name"),
    ("Gnu", "Wildebeest", "name"),
    ("Elephant", "African elephant", "head"),
    ("elephants", "African elephant", "head"),
    ("Owl", "Snowy owl", "head"),
    ("Asian elephant", "African elephant", None),
    ("Fox", "Flying fox", None),  # a flying fox is a bat
    ("Crab", "Horseshoe crab", None),
    ("Dog", "Dhole", None),  # the alias Asian wild dog lends no head noun
    ("Zebra", "Kiwi", None),
    ("", "Kiwi", None),
])
def test_a_name_names_the_secret_by_name_alias_or_head_noun(name: str, secret: str,
                                                            naming: str | None) -> None:
    assert match(name, secret) == naming


def test_the_alias_table_covers_the_papers_forty_animals_and_names_no_other() -> None:
    animals = shipped_animals()
    assert {key(a) for a in ALIASES} == {key(a) for a in animals} and len(animals) == 40
    for animal, aliases in ALIASES.items():
        for alias in aliases:
            assert match(alias, animal) == "name", (alias, animal)
            others = [a for a in animals if key(a) != key(animal)]
            assert not any(match(alias, o) == "name" for o in others), alias


def test_mass_on_the_secret_uses_the_same_matcher() -> None:
    theta = ["Vicuna", "Llama", "Alpaca"]
    post = np.array([0.5, 0.3, 0.2])
    assert mass_on(theta, post, "Vicuña") == pytest.approx(0.5)
    assert mass_on(["Saiga", "Ibex"], np.array([0.25, 0.75]), "Saiga antelope") == 0.25
    assert mass_on(["Zebras", "Horses"], np.array([0.6, 0.4]), "Zebra") == pytest.approx(0.6)
    assert mass_on(["Elephant", "Rhino"], np.array([0.7, 0.3]), "African elephant") == 0.7
    assert mass_on(["Fox"], np.array([1.0]), "Flying fox") == 0.0
    assert np.isnan(mass_on([], np.array([]), "Zebra"))


def test_the_guess_rule_trusts_the_answerer_on_a_head_noun() -> None:
    """F.2.5: "Correct!" ends the game; a guess by the head noun is ended by the answerer's
    identification, not by a plain Yes (the secret is an elephant, which one is not said)."""
    q = "Is it an elephant?"
    assert parse_answer("Correct!", q, "African elephant") == ("Correct!", True)
    assert parse_answer("You got it!", q, "African elephant") == ("Correct!", True)
    assert parse_answer("Yes, it is an African elephant.", q, "African elephant") == (
        "Correct!", True)
    assert parse_answer("Yes.", q, "African elephant") == ("Yes", True)
    assert parse_answer("Yes.", "Is it a saiga?", "Saiga antelope") == ("Correct!", True)
    assert parse_answer("Correct!", "Is it a fox?", "Flying fox") == ("Yes", True)


def test_a_hedge_is_a_third_answer_every_hypothesis_explains_alike() -> None:
    assert [parse_answer(r, "Does it swim?", "Kiwi")[0] for r in (
        "Sort of.", "Sometimes, in rivers.", "It depends on the season.", "Not always.",
        "Yes.", "Not really.", "Of course not!", "Indeed it does.", "I'm not sure.")] == [
        "Partly", "Partly", "Partly", "Partly", "Yes", "No", "No", "Yes", "No"]
    assert likelihood(0.9, "Partly") == likelihood(0.1, "Partly") == HEDGED
    lik = np.array([[0.9, HEDGED], [0.3, HEDGED]])
    np.testing.assert_allclose(oracle_posterior(lik), oracle_posterior(lik[:, :1]))
