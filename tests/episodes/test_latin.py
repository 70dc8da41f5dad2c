"""The cyclic Latin square that assigns outcomes to answer positions."""

from __future__ import annotations

import pytest

import belieflens.episodes
from belieflens.episodes.latin import latin_square


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_latin_square_rows_and_columns_are_permutations(k: int) -> None:
    sq = latin_square(k)
    assert sq.shape == (k, k)
    for i in range(k):
        assert sorted(sq[i]) == list(range(k))
        assert sorted(sq[:, i]) == list(range(k))
    assert all(sq[r, j] == (r + j) % k for r in range(k) for j in range(k))


def test_latin_square_rejects_empty() -> None:
    with pytest.raises(ValueError):
        latin_square(0)


def test_episodes_exports_the_public_name() -> None:
    assert belieflens.episodes.latin_square is latin_square
