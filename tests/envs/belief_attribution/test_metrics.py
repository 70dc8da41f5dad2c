"""Belief attribution: revision, revise rates and the BAS with its bootstrap interval."""

from __future__ import annotations

import numpy as np
import pytest

from belieflens.envs.belief_attribution.metrics import (
    bas,
    bas_by_domain,
    bootstrap_bas,
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
