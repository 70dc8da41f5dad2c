"""The cyclic Latin square that assigns outcomes to answer positions, one row per rotation.

A probe with ``k`` outcomes is asked ``k`` times; under rotation ``r`` position ``j`` shows
outcome ``(r + j) % k``. Every outcome appears once at every position, so pooling over
rotations (:func:`belieflens.probes.debias`) cancels any per-position preference of the model.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Int


def latin_square(k: int) -> Int[np.ndarray, "rotation option"]:
    """The cyclic ``k x k`` Latin square: row ``r`` is the outcome shown at each position."""
    if k < 1:
        raise ValueError(f"latin_square needs k >= 1, got {k}")
    r = np.arange(k)[:, None]
    j = np.arange(k)[None, :]
    return np.asarray((r + j) % k, dtype=np.int64)
