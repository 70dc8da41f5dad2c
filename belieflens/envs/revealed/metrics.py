"""Pure metrics comparing a read-out with the truth, on named xarray dimensions.

Distributions live on dimension ``outcome``; an outcome is *real* where both the
belief and the true distribution are defined (not NaN). Padded outcomes (past a
grid point's number of outcomes) are NaN and ignored; a read-out whose belief is
NaN everywhere (missing) gives NaN, never a number.

Smoothing for the symmetric KL: the true distribution often rules outcomes out
(an observation "the result is even" gives odd results probability 0), which
makes KL(belief ‖ truth) infinite. The truth is therefore smoothed additively
over its real outcomes before the KL, ``q' = (q + eps) / (1 + K eps)`` with ``K``
the number of real outcomes, which still sums to 1. With the default
``eps = 1e-3`` belief mass ``m`` on an impossible outcome costs about
``m ln(m K / eps)`` nats in KL(belief ‖ truth). The belief itself is not smoothed
(a softmax never reaches 0; :func:`belieflens.analysis.kl` floors it at 1e-12).
Chebyshev and L1 use the unsmoothed distributions.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import xarray as xr

from belieflens.analysis.divergence import chebyshev, l1, sym_kl
from belieflens.dims import OUTCOME

DEFAULT_EPS: Final = 1e-3
"""Additive smoothing of the true distribution before the symmetric KL (module docstring)."""

MODE_TOL: Final = 1e-9
"""Two probabilities closer than this count as tied (for the mode and for uniformity)."""


def _real(belief: xr.DataArray, truth: xr.DataArray) -> xr.DataArray:
    return belief.notnull() & truth.notnull()


def smooth(truth: xr.DataArray, real: xr.DataArray, eps: float, dim: str = OUTCOME) -> xr.DataArray:
    """``(truth + eps) / (1 + K eps)`` on the real outcomes (``K`` of them), 0 elsewhere."""
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    k = real.sum(dim)
    return ((truth.fillna(0.0) + eps) / (1.0 + k * eps)).where(real, 0.0)


def distances(
    belief: xr.DataArray, truth: xr.DataArray, *, eps: float = DEFAULT_EPS, dim: str = OUTCOME
) -> xr.Dataset:
    """Chebyshev, L1 and symmetric KL (nats) of ``belief`` to ``truth`` over ``dim``.

    Broadcasts (e.g. a lens belief with a ``layer`` dim against the truth).
    Returns variables ``chebyshev``, ``l1``, ``sym_kl``; NaN where the belief is missing.
    """
    real = _real(belief, truth)
    defined = real.any(dim)
    p = belief.where(real, 0.0)
    q = truth.where(real, 0.0)
    return xr.Dataset(
        {
            "chebyshev": chebyshev(p, q, dim).where(defined),
            "l1": l1(p, q, dim).where(defined),
            "sym_kl": sym_kl(smooth(truth, real, eps, dim), p, dim).where(defined),
        }
    )


def _argmax(x: xr.DataArray, dim: str) -> xr.DataArray:
    return x.fillna(-np.inf).argmax(dim)


def unique_mode(truth: xr.DataArray, dim: str = OUTCOME) -> xr.DataArray:
    """Index of the truth's unique most likely outcome; -1 where the top is shared or missing."""
    filled = truth.fillna(-np.inf)
    top = filled.max(dim)
    ties = (filled >= top - MODE_TOL).sum(dim)
    return _argmax(truth, dim).where((ties == 1) & truth.notnull().any(dim), -1)


def revealed_correct(belief: xr.DataArray, truth: xr.DataArray, dim: str = OUTCOME) -> xr.DataArray:
    """RevB: 1.0 where the belief's argmax is the truth's unique mode, else 0.0.

    NaN where the truth has no unique mode or the belief is missing.
    """
    mode = unique_mode(truth, dim)
    hit = (_argmax(belief, dim) == mode).astype(np.float64)
    return hit.where((mode >= 0) & belief.notnull().any(dim))


def stated_correct(stated: xr.DataArray, correct: xr.DataArray, dim: str = OUTCOME) -> xr.DataArray:
    """StaA: 1.0 where the stated read-out's most likely candidate is the correct one, else 0.0.

    ``correct`` is the correct candidate's outcome index (float, NaN = unknown).
    NaN where the read-out or the index is missing.
    """
    hit = (_argmax(stated, dim) == correct).astype(np.float64)
    return hit.where(stated.notnull().any(dim) & correct.notnull())


def first_option_mass(
    belief: xr.DataArray, truth: xr.DataArray, dim: str = OUTCOME
) -> xr.Dataset:
    """Belief on the first outcome where the truth is uniform, next to the expected ``1/|O|``.

    Returns ``p_first`` (NaN where the truth is not uniform over its real outcomes
    or the belief is missing) and ``expected`` (``1/|O|``, NaN likewise) and
    ``n_outcome`` (``|O|``).
    """
    real = _real(belief, truth)
    k = real.sum(dim)
    spread = truth.where(real).max(dim) - truth.where(real).min(dim)
    uniform = (spread <= MODE_TOL) & (k >= 2) & real.isel({dim: 0})
    return xr.Dataset(
        {
            "p_first": belief.isel({dim: 0}, drop=True).where(uniform),
            "expected": (1.0 / k.where(k > 0)).where(uniform),
            "n_outcome": k,
        }
    )
