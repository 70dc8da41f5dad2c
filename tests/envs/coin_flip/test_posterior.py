"""The coin flip's exact posterior (swaps, noisy reports, tempering) against independent
computations: enumeration of every latent history, a fine grid, the closed form."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from belieflens.envs.coin_flip.env import bias_oracle, next_flip_oracle
from belieflens.envs.coin_flip.posterior import Filter, GridFilter, Report, beliefs


def enumerated(a0: float, b0: float, reports: list[Report], hazard: float, bins: int
               ) -> tuple[float, np.ndarray]:
    """(next flip, bias bins) by summing over every swap pattern and every true flip: the
    joint of the generative process, Beta-Bernoulli within each coin's run."""
    n = len(reports)
    edges = np.linspace(0, 1, bins + 1)
    total, mean, mass = 0.0, 0.0, np.zeros(bins)
    for swaps in itertools.product([0, 1], repeat=max(n - 1, 0)):
        p_swaps = float(np.prod([hazard if s else 1 - hazard for s in swaps]))
        for flips in itertools.product([0, 1], repeat=n):
            runs: list[list[int]] = [[]]
            for i, x in enumerate(flips):
                if i and swaps[i - 1]:
                    runs.append([])
                runs[-1].append(x)
            p_flips = np.prod([np.exp(special.betaln(a0 + sum(r), b0 + len(r) - sum(r))
                                      - special.betaln(a0, b0)) for r in runs])
            p_reports = np.prod([r.reliability if r.face == x else 1 - r.reliability
                                 for r, x in zip(reports, flips, strict=True)])
            w = p_swaps * p_flips * p_reports
            h, t = sum(runs[-1]), len(runs[-1]) - sum(runs[-1])
            total += w
            mean += w * (a0 + h) / (a0 + b0 + h + t)
            mass += w * np.diff(special.betainc(a0 + h, b0 + t, edges))
    m = mean / total
    if n:
        m = (1 - hazard) * m + hazard * a0 / (a0 + b0)
    return m, mass / total


histories = st.lists(st.tuples(st.integers(0, 1), st.sampled_from([1.0, 0.95, 0.8, 0.6])),
                     max_size=6)


@given(a0=st.floats(0.3, 4), b0=st.floats(0.3, 4), hazard=st.sampled_from([0.0, 0.1, 0.5]),
       history=histories, bins=st.integers(2, 6))
@settings(max_examples=40, deadline=None)
def test_the_filter_is_the_enumerated_posterior(a0: float, b0: float, hazard: float,
                                                history: list[tuple[int, float]],
                                                bins: int) -> None:
    reports = [Report(face, rel) for face, rel in history]
    f = Filter(a0, b0, hazard=hazard)
    for r in reports:
        f.update(r)
    mean, mass = enumerated(a0, b0, reports, hazard, bins)
    assert f.next_flip()[0] == pytest.approx(mean, abs=1e-12)
    assert np.allclose(f.bins(bins), mass, atol=1e-12)


@given(a0=st.floats(1, 4), b0=st.floats(1, 4), hazard=st.sampled_from([0.0, 0.2]),
       history=histories)
@settings(max_examples=25, deadline=None)
def test_the_grid_agrees_with_the_mixture(a0: float, b0: float, hazard: float,
                                          history: list[tuple[int, float]]) -> None:
    """At S = 1 (any reports) and tempered with direct reports, the grid and the mixture are
    two computations of one posterior (priors with a bounded density: the grid serves
    tempered noisy reports, whose likelihood is bounded away from 0)."""
    for strength in (1.0, 0.3):
        reports = [Report(face, rel if strength == 1.0 else 1.0) for face, rel in history]
        f, g = Filter(a0, b0, hazard=hazard, strength=strength), GridFilter(
            a0, b0, hazard=hazard, strength=strength)
        for r in reports:
            f.update(r)
            g.update(r)
        assert g.next_flip()[0] == pytest.approx(f.next_flip()[0], abs=1e-6)
        assert np.allclose(g.bins(5), f.bins(5), atol=1e-5)


@given(a0=st.floats(0.2, 5), b0=st.floats(0.2, 5), faces=st.lists(st.integers(0, 1),
                                                                  max_size=30),
       strength=st.sampled_from([1.0, 0.3, 2.0]))
@settings(max_examples=40, deadline=None)
def test_without_swaps_or_noise_it_is_the_tempered_beta(a0: float, b0: float,
                                                        faces: list[int],
                                                        strength: float) -> None:
    out = beliefs(a0, b0, [Report(f) for f in faces], strength=strength, bins=5)
    for n, (next_flip, bins) in enumerate(out):
        h = strength * sum(faces[:n])
        assert next_flip[0] == pytest.approx(next_flip_oracle(a0, b0, h, strength * n)[0],
                                             abs=1e-12)
        assert np.allclose(bins, bias_oracle(a0, b0, h, strength * n, 5), atol=1e-10)


def test_order_matters_only_where_the_coin_may_be_swapped() -> None:
    early = [Report(1)] * 5 + [Report(0)] * 5
    late = [Report(0)] * 5 + [Report(1)] * 5
    same = [beliefs(1, 1, seq, bins=5)[-1][0][0] for seq in (early, late)]
    assert same[0] == pytest.approx(same[1], abs=1e-12)
    swapped = [beliefs(1, 1, seq, hazard=0.2, bins=5)[-1][0][0] for seq in (early, late)]
    assert swapped[1] - swapped[0] > 0.15  # recent first faces count more


def test_an_unreliable_report_moves_the_belief_less() -> None:
    sure, doubtful, useless = (beliefs(1, 1, [Report(1, r)], bins=5)[-1][0][0]
                               for r in (1.0, 0.7, 0.5))
    assert sure == pytest.approx(2 / 3)
    assert 0.5 < doubtful < sure
    assert useless == pytest.approx(0.5)


def test_a_long_noisy_swapping_history_stays_small_and_normalised() -> None:
    rng = np.random.default_rng(0)
    f = Filter(2, 2, hazard=0.1)
    for _ in range(400):
        f.update(Report(int(rng.random() < 0.6), float(rng.choice([0.6, 0.9]))))
    w, _, _ = f.components()
    assert w.sum() == pytest.approx(1.0)
    assert len(w) < 40_000  # pruned: the full recursion holds ~80,000
    assert 0.0 < f.next_flip()[0] < 1.0
