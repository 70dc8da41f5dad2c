"""twenty-questions against From Prompts to Posteriors' own text (App. F.2): the quoted prompts,
the 40 animals, the filters and the EIG; parameters and bad input.

``PAPER`` is the fixture: passages quoted verbatim from
``../shared/papers/prompts-to-posteriors.txt`` (§5.1 and App. F.2.1–F.2.6). The paper's user
prompts are not in its text, so only the system prompts, the guess question and the result
``Correct!`` can be compared word for word.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import belieflens.envs as envs
from belieflens.envs.twenty_questions.animals import select_animals, shipped_animals
from belieflens.envs.twenty_questions.answers import parse_answer
from belieflens.envs.twenty_questions.bayes import (
    THRESHOLD,
    eig,
    keep_compatible,
    kl_divergence,
    likelihood,
    model_posterior,
    oracle_posterior,
    p_yes,
)
from belieflens.envs.twenty_questions.env import TwentyQuestions
from belieflens.envs.twenty_questions.prompts import (
    ANSWERER_SYSTEM,
    CORRECT,
    JUDGE_SYSTEM,
    QUESTIONS_SYSTEM,
    answer_prompt,
    compat_query,
    guess,
    likelihood_query,
    parse_hypotheses,
    parse_questions,
    questions_prompt,
)
from belieflens.errors import ImportFormatError, ParameterError

PAPER: dict[str, object] = {
    # App. F.2.2
    "judge_system": (
        "You are playing a game of 20 Questions trying to guess an animal. After asking Yes/No "
        "questions and receiving answers, you will be prompted to judge whether a given animal "
        "fits the questions and answers."
    ),
    # App. F.2.4
    "questions_system": (
        "You are playing a game of 20 Questions to guess an animal. When asked, you must produce "
        "Yes/No questions. You must not add any explanation or extra text; only return the "
        "strict format requested by the user."
    ),
    # App. F.2.5
    "answerer_system": "You are playing the answerer in a game of 20 Questions. Your chosen "
                       "entity is:",
    "correct": "Correct!",
    # App. F.2.4: "ξ_{k+1} = Is it Θk[0]?"
    "guess": "Is it {}?",
    # §5.1: "e.g. ξ = "Does it swim?", y ∈ {Yes, No}"
    "example_question": "Does it swim?",
    # App. F.2.5
    "correct_rule": (
        "If the experimental result is Correct!, we set $p(\\theta^{\\star})_{j}=1$ "
        "$\\forall j\\geq k+1$, and finish the current run without recording the KL on any "
        "further questions."
    ),
    # §4.2
    "active": (
        "we let an active Bayesian agent update beliefs $p^{\\,k}_{\\text{ora-act}}$ using Eq. 1 "
        "and choose experiments based on those beliefs."
    ),
    "gap": "p^{\\,k}_{\\text{ora-act}}(\\theta^{\\star})-p^{k}_{\\text{LLM}}(\\theta^{\\star})",
    # App. F.2.6
    "animals": (
        "Coyote, Rhinoceros beetle, Wolverine, Saiga antelope, Yak, Kiwi, Zebra, Golden jackal, "
        "Horseshoe crab, Sand cat, European Badger, Blue dragon sea slug, Cassowary, Electric "
        "eel, Flying fox, Giraffe, Hammerhead shark, Vicuña, Ibex, Aye-aye, Scarlet macaw, "
        "Peregrine falcon, Wildebeest, Capybara, Sea otter, Leafcutter ant, African elephant, "
        "Rosy boa, Quetzal, Snowy owl, Jerboa, Gharial, Albatross, Dhole, Kookaburra, Monarch "
        "butterfly, Uakari, Bottlenose dolphin, Platypus, Brown bear"
    ),
}


def test_system_prompts_are_the_papers() -> None:
    assert PAPER["judge_system"] == JUDGE_SYSTEM
    assert PAPER["questions_system"] == QUESTIONS_SYSTEM
    assert PAPER["answerer_system"] == ANSWERER_SYSTEM
    assert PAPER["correct"] == CORRECT
    assert compat_query("Yak", [("Does it swim?", "No")]).messages[0].content == JUDGE_SYSTEM
    assert questions_prompt(["Yak"], [], 15)[0].content == QUESTIONS_SYSTEM
    system = answer_prompt("Zebra", "Does it swim?")[0].content
    assert system == f"{PAPER['answerer_system']} Zebra"
    # p(y | θ, ξ) is read from the answerer playing θ, asked ξ
    lq = likelihood_query("Kiwi", str(PAPER["example_question"]))
    assert lq.messages[0].content == f"{PAPER['answerer_system']} Kiwi"
    assert lq.messages[1].content.startswith("Does it swim?")
    assert lq.options == (" Yes", " No") and lq.outcome == (0, 1)


def test_guess_question_is_the_papers() -> None:
    assert guess("Platypus") == str(PAPER["guess"]).format("Platypus")


def test_the_papers_40_animals_ship() -> None:
    quoted = tuple(a.strip() for a in str(PAPER["animals"]).split(","))
    assert len(quoted) == 40
    assert shipped_animals() == quoted
    assert select_animals("paper") == quoted
    assert select_animals("3") == quoted[:3]
    assert select_animals("Zebra, Kiwi") == ("Zebra", "Kiwi")
    env = envs.get("twenty-questions")
    assert isinstance(env, TwentyQuestions)
    assert env.params.steps == 20 and env.params.candidates == 15
    assert env.params.eig_sample == 15 and env.params.hypotheses == 100
    assert env.params.max_chars == 30
    assert env.params.temperature == 1.3 and env.params.answer_temperature == 0.7


def test_p_yes_is_normalised_over_yes_and_no() -> None:
    assert p_yes(math.log(0.3), math.log(0.1)) == pytest.approx(0.75)
    assert p_yes(-500.0, -501.0) == pytest.approx(1 / (1 + math.exp(-1)))
    assert likelihood(0.8, "Yes") == 0.8 and likelihood(0.8, "No") == pytest.approx(0.2)


def test_compatibility_filter_drops_below_point_two_and_keeps_the_most_probable() -> None:
    assert THRESHOLD == 0.2
    compat = [0.1, 0.2, 0.9, 0.19999, 0.5, 0.9]
    assert keep_compatible(compat) == [2, 5, 4, 1]        # 0.2 itself stays (< 0.2 dropped)
    assert keep_compatible(compat, limit=2) == [2, 5]
    post = model_posterior(np.array([0.9, 0.3]))
    assert post.tolist() == pytest.approx([0.75, 0.25])


def test_oracle_filter_drops_at_or_below_point_two() -> None:
    lik = np.array([[0.9, 0.5], [0.2, 1.0], [0.6, 0.5]])  # θ1 has a likelihood of exactly 0.2
    post = oracle_posterior(lik)
    assert post.tolist() == pytest.approx([0.6, 0.0, 0.4])
    assert np.isnan(oracle_posterior(np.array([[0.1], [0.2]]))).all()


def test_kl_is_oracle_first() -> None:
    p, q = np.array([0.6, 0.4]), np.array([0.5, 0.5])
    assert kl_divergence(p, q) == pytest.approx(0.6 * math.log(1.2) + 0.4 * math.log(0.8))
    assert kl_divergence(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == math.inf
    assert kl_divergence(q, q) == 0.0


def test_eig_over_outcomes_on_the_sample() -> None:
    # a question that splits two certain hypotheses gains ln 2; one that all answer alike, 0
    gains = eig(np.array([[1.0, 0.0], [1.0, 1.0], [0.5, 0.5]]))
    assert gains.tolist() == pytest.approx([math.log(2), 0.0, 0.0])
    assert eig(np.zeros((3, 0))).tolist() == [0.0, 0.0, 0.0]


def test_beliefs_over_thirty_characters_are_dropped() -> None:
    text = "1. Zebra\n- 2. Kiwi\nzebra\nA lizard that lives in the desert sand\n\nRed fox."
    assert parse_hypotheses(text, max_chars=30) == ["Zebra", "Kiwi", "Red fox"]
    assert parse_questions("1. Does it swim?\n2. 2. Does it fly?\nDoes it swim?", 15) == [
        "Does it swim?", "Does it fly?"]
    assert parse_questions("Q1?\nQ2?\nQ3?", 2) == ["Q1?", "Q2?"]


def test_answers_are_parsed() -> None:
    assert parse_answer(" Yes, it does.", "Does it swim?", "Zebra") == ("Yes", True)
    assert parse_answer("no", "Does it swim?", "Zebra") == ("No", True)
    assert parse_answer("Correct! It is a zebra.", "Is it Zebra?", "Zebra") == ("Correct!", True)
    assert parse_answer("Maybe", "Does it swim?", "Zebra") == ("No", False)


GUESS, ATTRIBUTE, OTHER = "Is it Zebra?", "Is it a mammal?", "Is it Lion?"
"""A guess naming the secret (Zebra), an attribute question, a guess naming another animal."""


@pytest.mark.parametrize(("question", "reply", "result"), [
    # the guess confirmed, in the words a model uses: the run ends (F.2.5's "Correct!")
    (GUESS, "Yes, correct!", ("Correct!", True)),
    (GUESS, "Yes, that's correct.", ("Correct!", True)),
    (GUESS, "Correct!", ("Correct!", True)),
    (GUESS, "correct, it is a Zebra", ("Correct!", True)),
    (GUESS, "Yes! You guessed it", ("Correct!", True)),
    ("Is it a zebra?", "Yes.", ("Correct!", True)),
    ("Is it a zebra?", "It's a zebra!", ("Correct!", True)),
    # a confirmation of anything but a guess naming the secret is a Yes: the game goes on
    (ATTRIBUTE, "Yes, that's correct.", ("Yes", True)),
    (ATTRIBUTE, "Correct, it is a mammal.", ("Yes", True)),
    (ATTRIBUTE, "Correct!", ("Yes", True)),
    (OTHER, "Yes! You guessed it", ("Yes", True)),
    (OTHER, "Correct!", ("Yes", True)),
    # a No, however it goes on
    (GUESS, "No, but close", ("No", True)),
    (GUESS, "No. The correct answer is a horse.", ("No", True)),
    (GUESS, "Not correct.", ("No", True)),
    (GUESS, "That isn't correct", ("No", True)),
    (GUESS, "Incorrect.", ("No", True)),
    (ATTRIBUTE, "Yes, it has stripes", ("Yes", True)),
    # nothing stated: read as No, and recorded as not valid
    (GUESS, "", ("No", False)),
    (GUESS, "   \n", ("No", False)),
    (GUESS, "I am not sure.", ("No", False)),
    (GUESS, 'The question is "Is it Zebra?"', ("No", False)),
])
def test_the_replies_a_model_gives_are_parsed(question: str, reply: str,
                                              result: tuple[str, bool]) -> None:
    """The answerer is a model: "Yes, correct!" to a guess naming the secret is the guess
    confirmed (App. F.2.5: "If the experimental result is Correct!, ... finish the current
    run"); the same words after an attribute question are a Yes that lets the game go on."""
    assert "finish the current run" in str(PAPER["correct_rule"])
    assert parse_answer(reply, question, "Zebra") == result


def test_eig_under_a_belief_weighs_the_hypotheses() -> None:
    """The active oracle chooses "experiments based on those beliefs" (§4.2): its EIG takes
    θ distributed as its posterior instead of uniformly."""
    assert "choose experiments based on those beliefs" in str(PAPER["active"])
    split = np.array([[0.9, 0.1, 0.5]])
    assert eig(split, np.ones(3)).tolist() == pytest.approx(eig(split).tolist())
    assert eig(split, np.array([2.0, 2.0, 0.0]))[0] == pytest.approx(
        eig(split[:, :2])[0])  # weights are normalised; a weight of 0 drops θ
    # certain of one θ: no question is informative
    assert eig(np.array([[1.0, 0.0], [0.3, 0.6]]), np.array([1.0, 0.0])).tolist() == \
        pytest.approx([0.0, 0.0], abs=1e-12)


@pytest.mark.parametrize(
    "content",
    ['{"animals": ["Zebra"]}', "[]", '["Zebra", 3]', '["Zebra", "zebra"]', '["Zebra", ""]',
     "Zebra\nKiwi"],
)
def test_an_animals_file_that_is_not_a_list_of_names_is_one_line(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "animals.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ImportFormatError) as err:
        envs.get("twenty-questions", animals=str(path))
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_a_list_of_names_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "animals.json"
    path.write_text(json.dumps(["Zebra", "Kiwi"]), encoding="utf-8")
    env = envs.get("twenty-questions", animals=str(path))
    assert isinstance(env, TwentyQuestions)
    assert env.animals == ("Zebra", "Kiwi")


@pytest.mark.parametrize(
    "params",
    [{"steps": 0}, {"candidates": 0}, {"eig_sample": 0}, {"animals": "41"}, {"animals": ""},
     {"temperature": -1}, {"max_chars": 0}],
)
def test_bad_parameters(params: dict[str, object]) -> None:
    with pytest.raises((ParameterError, ImportFormatError)):
        envs.get("twenty-questions", **params)


def test_cli_bad_animals_file_exit_2_nothing_written(tmp_path: Path) -> None:
    bad = tmp_path / "animals.json"
    bad.write_text('{"animals": ["Zebra"]}', encoding="utf-8")
    out = tmp_path / "study.h5"
    run = subprocess.run(
        [sys.executable, "-m", "belieflens.cli.main", "extract", "twenty-questions",
         "--set", f"animals={bad}", "--out", str(out)],
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 2
    lines = [x for x in run.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "list of animal names" in lines[0]
    assert list(tmp_path.iterdir()) == [bad]
