"""Belief attribution: revision, revise rates and the BAS with its bootstrap interval."""

from __future__ import annotations

import numpy as np
import pytest

from belieflens.envs.belief_attribution.metrics import (
    bas,
    bas_by_domain,
    bootstrap_bas,
    bootstrap_bas_questions,
    revise_rate,
    revised,
    revision,
)


def test_revision_is_mass_moved_to_the_contradiction() -> None:
    before = np.array([[0.8, 0.1, 0.1], [0.6, 0.3, 0.1]])
    after = np.array([[0.2, 0.7, 0.1], [0.5, 0.3, 0.2]])
    shift = revision(before, after, np.array([1, 2]))
    assert shift == pytest.approx([0.6, 0.1])
    assert revised(shift, 0.5).tolist() == [True, False]
    assert revise_rate(shift, 0.5) == 0.5


def test_revision_checks_shapes() -> None:
    with pytest.raises(ValueError):
        revision(np.ones((2, 3)) / 3, np.ones((2, 2)) / 2, np.array([0, 1]))
    with pytest.raises(ValueError):
        revision(np.ones((2, 3)) / 3, np.ones((2, 3)) / 3, np.array([0, 3]))
    with pytest.raises(ValueError):
        revised(np.zeros(2), 0.0)


def test_bas_values() -> None:
    assert bas(0.6, 0.2) == pytest.approx(0.5)
    assert bas(0.2, 0.6) == pytest.approx(-0.5)
    assert bas(0.3, 0.3) == 0.0
    # the benchmark's code: (u - s) / (u + s + 1e-9) is 0 when neither condition revises
    assert bas(0.0, 0.0) == 0.0
    assert bas(0.0, 0.0) == pytest.approx((0.0 - 0.0) / (0.0 + 0.0 + 1e-9))
    assert bas(1e-3, 0.0) == pytest.approx((1e-3 - 0.0) / (1e-3 + 0.0 + 1e-9), rel=1e-5)


def _synthetic(
    rng: np.random.Generator, n: int, p_user: float, p_self: float
) -> tuple[np.ndarray, np.ndarray]:
    """Revision flags derived from synthetic beliefs, as the pipeline would compute them."""
    out = []
    for p in (p_user, p_self):
        flips = rng.random(n) < p
        before = np.tile([0.8, 0.1, 0.1], (n, 1))
        after = np.where(flips[:, None], [0.1, 0.8, 0.1], [0.7, 0.2, 0.1])
        out.append(revised(revision(before, after, np.ones(n, dtype=np.int64))))
    return out[0], out[1]


def test_bootstrap_interval_covers_the_truth_and_is_seeded() -> None:
    ru, rs = _synthetic(np.random.default_rng(0), 400, 0.6, 0.2)
    res = bootstrap_bas(ru, rs, np.random.default_rng(1), n_boot=1000)
    assert res.low < 0.5 < res.high
    assert res.low <= res.bas <= res.high
    assert res.n_user == res.n_self == 400
    again = bootstrap_bas(ru, rs, np.random.default_rng(1), n_boot=1000)
    assert again == res
    other = bootstrap_bas(ru, rs, np.random.default_rng(2), n_boot=1000)
    assert other.bas == res.bas and other.low != res.low


def test_bootstrap_interval_narrows_with_more_data() -> None:
    rng = np.random.default_rng(3)
    small = bootstrap_bas(*_synthetic(rng, 50, 0.5, 0.3), np.random.default_rng(4), n_boot=500)
    big = bootstrap_bas(*_synthetic(rng, 2000, 0.5, 0.3), np.random.default_rng(4), n_boot=500)
    assert big.high - big.low < small.high - small.low


def test_bootstrap_no_revision_gives_zero() -> None:
    res = bootstrap_bas(np.zeros(5, bool), np.zeros(5, bool), np.random.default_rng(0), n_boot=50)
    assert (res.bas, res.low, res.high) == (0.0, 0.0, 0.0)


def test_bas_by_domain() -> None:
    rng = np.random.default_rng(5)
    flags, cond, dom = [], [], []
    for domain, (pu, ps) in {"geo": (0.8, 0.2), "math": (0.2, 0.8)}.items():
        ru, rs = _synthetic(rng, 300, pu, ps)
        flags += [*ru, *rs]
        cond += ["user"] * 300 + ["self"] * 300
        dom += [domain] * 600
    out = bas_by_domain(np.array(flags), cond, dom, np.random.default_rng(6), n_boot=500)
    assert set(out) == {"geo", "math", "all"}
    assert out["geo"].low > 0.4
    assert out["math"].high < -0.4
    assert out["all"].low < 0 < out["all"].high
    with pytest.raises(ValueError):
        bas_by_domain(np.array([True]), ["other"], ["geo"], np.random.default_rng(0))


def _paired(rng: np.random.Generator, n: int, p_user: float, p_self: float,
            shared: float) -> tuple[np.ndarray, list[str], list[str]]:
    """n questions asked in both conditions; with probability ``shared`` a question's two
    flags are one draw (a hard question makes both conditions revise)."""
    flags, cond, qid = [], [], []
    for i in range(n):
        common = rng.random() < shared
        u0 = rng.random()
        u = u0 < p_user
        s = (u0 < p_self) if common else bool(rng.random() < p_self)
        flags += [u, s]
        cond += ["user", "self"]
        qid += [f"q{i}"] * 2
    return np.array(flags), cond, qid


def test_bootstrap_over_questions_is_seeded_and_covers_the_truth() -> None:
    flags, cond, qid = _paired(np.random.default_rng(0), 400, 0.6, 0.2, 0.0)
    res = bootstrap_bas_questions(flags, cond, qid, np.random.default_rng(1), n_boot=1000)
    assert res.low < 0.5 < res.high and res.low <= res.bas <= res.high
    assert (res.n_user, res.n_self, res.questions) == (400, 400, 400)
    assert bootstrap_bas_questions(flags, cond, qid, np.random.default_rng(1),
                                   n_boot=1000) == res
    assert res.bas == bootstrap_bas(flags[0::2], flags[1::2], np.random.default_rng(1)).bas


def test_bootstrap_over_questions_keeps_a_questions_conditions_together() -> None:
    # each question revises in both conditions or in neither: every resample has equal rates
    same = np.repeat(np.random.default_rng(2).random(100) < 0.4, 2)
    cond, qid = ["user", "self"] * 100, [f"q{i // 2}" for i in range(200)]
    res = bootstrap_bas_questions(same, cond, qid, np.random.default_rng(3), n_boot=500)
    assert (res.bas, res.low, res.high) == (0.0, 0.0, 0.0)
    # resampling each condition on its own ignores the pairing and finds a wide interval
    apart = bootstrap_bas(same[0::2], same[1::2], np.random.default_rng(3), n_boot=500)
    assert apart.high - apart.low > 0.2
    # questions shared between conditions make the question interval narrower
    flags, c2, q2 = _paired(np.random.default_rng(4), 300, 0.5, 0.3, 0.9)
    paired = bootstrap_bas_questions(flags, c2, q2, np.random.default_rng(5), n_boot=1000)
    free = bootstrap_bas(flags[0::2], flags[1::2], np.random.default_rng(5), n_boot=1000)
    assert paired.high - paired.low < free.high - free.low


def test_bootstrap_over_questions_edge_cases() -> None:
    # a question asked in one condition only: resamples missing a condition are left out
    res = bootstrap_bas_questions([True, False], ["user", "self"], ["a", "b"],
                                  np.random.default_rng(0), n_boot=200)
    assert res.bas == 1.0 and res.low == res.high == 1.0 and res.questions == 2
    none = bootstrap_bas_questions(np.zeros(4, bool), ["user", "self"] * 2, ["a", "a", "b", "b"],
                                   np.random.default_rng(0), n_boot=50)
    assert (none.bas, none.low, none.high) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="one entry per item"):
        bootstrap_bas_questions([True], ["user"], ["a", "b"], np.random.default_rng(0))
    with pytest.raises(ValueError, match="both conditions"):
        bootstrap_bas_questions([True], ["user"], ["a"], np.random.default_rng(0))
    with pytest.raises(ValueError, match="'user' or 'self'"):
        bootstrap_bas_questions([True], ["other"], ["a"], np.random.default_rng(0))


def test_bas_by_domain_over_questions() -> None:
    flags, cond, qid = _paired(np.random.default_rng(7), 200, 0.8, 0.2, 0.5)
    dom = ["geo"] * 200 + ["math"] * 200
    out = bas_by_domain(flags, cond, dom, np.random.default_rng(8), n_boot=300, question=qid)
    assert set(out) == {"geo", "math", "all"}
    assert out["geo"].questions == out["math"].questions == 100 and out["all"].questions == 200
    assert out["all"].low > 0.3
    with pytest.raises(ValueError, match="question"):
        bas_by_domain(flags, cond, dom, np.random.default_rng(8), question=qid[:3])
