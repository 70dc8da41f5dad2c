"""Which episodes pair, and which episodes a learned intervention may see.

**Pairings** (:data:`PAIRINGS`) of whole probe instances at one (delivery, probe, turn), every
rotation paired with the same rotation, each pair aligned by role
(:func:`~belieflens.interventions.pairs.check_aligned`):

- ``any``: each episode with the next one (in episode order, cyclically) whose read-outs
  differ (:func:`~belieflens.interventions.pairs.pair_instances`);
- ``order``: **count-preserving order swaps**: each episode with the next one whose contexts
  hold the same tokens the same number of times, in another order (for every rotation). The
  counts of every piece of evidence are equal, only its order differs: an oracle that
  conditions on counts alone (a coin's posterior) does not move, so neither should a model
  that updates on counts; one whose oracle depends on order (a hidden Markov process, a
  change point) moves.

**Splits** (:func:`episode_split`): a learned intervention is trained on the pairs of the
``train`` episodes, its recipe chosen (the best layer) on ``validation`` pairs and scored on
``test`` pairs, each pair inside one split, so no scored read-out was seen in training.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np
from numpy.typing import NDArray

from belieflens.errors import ParameterError
from belieflens.interventions.pairs import Pair, misalignment, pair_instances
from belieflens.interventions.readouts import Selection, StudyReadouts

Pairing = Literal["any", "order"]
"""How base and source episodes are paired (module docstring)."""

PAIRINGS: tuple[Pairing, ...] = get_args(Pairing)

Split = Literal["train", "validation", "test"]
"""Which part of the episodes a pair belongs to."""

SPLITS: tuple[Split, ...] = get_args(Split)

MIN_SPLIT_EPISODES = 2
"""Episodes the validation and the test split need at least (a pair is two episodes)."""


def min_episodes(heldout: float) -> int:
    """The fewest episodes that give the validation and the test split
    :data:`MIN_SPLIT_EPISODES` each when ``heldout`` of them are held out (half each).

    Examples:
        >>> min_episodes(0.5)
        8
    """
    n = 2 * MIN_SPLIT_EPISODES
    while int(n * heldout / 2) < MIN_SPLIT_EPISODES or n - 2 * int(n * heldout / 2) < 2:
        n += 1
    return n


def episode_split(episodes: Sequence[int] | NDArray[np.int64], heldout: float,
                  rng: np.random.Generator) -> dict[int, Split]:
    """The split of each episode: ``heldout`` of them (shuffled by ``rng``) held out, half for
    validation and half for test, the rest for training; one line when there are too few
    (:func:`min_episodes`)."""
    eps = np.unique(np.asarray(episodes, dtype=np.int64))
    need = min_episodes(heldout)
    if eps.size < need:
        raise ParameterError(
            f"too few episodes: {eps.size} selected; a learned interchange holding out "
            f"{heldout:g} of them needs at least {need} (2 each for validation and test "
            "pairs, 2 for training)")
    order = rng.permutation(eps)
    k = int(eps.size * heldout / 2)
    out: dict[int, Split] = {int(e): "validation" for e in order[:k]}
    out.update({int(e): "test" for e in order[k : 2 * k]})
    out.update({int(e): "train" for e in order[2 * k :]})
    return out


def instance_pairs(study: StudyReadouts, select: Selection, pairing: Pairing) -> list[Pair]:
    """The pairs of whole probe instances of ``pairing`` among the read-outs ``select`` names
    (module docstring)."""
    if pairing == "any":
        return pair_instances(study, select)
    return order_swaps(study, select)


def _groups(study: StudyReadouts, keep: NDArray[np.bool_]
            ) -> dict[tuple[str, str, int], dict[int, dict[int, int]]]:
    """Selected read-outs by (delivery, probe, turn), then episode, then rotation."""
    t = study.table
    cols = [np.asarray(t[n].values) for n in ("delivery", "probe", "turn", "episode",
                                              "rotation")]
    groups: dict[tuple[str, str, int], dict[int, dict[int, int]]] = {}
    for q in np.flatnonzero(keep):
        key = (str(cols[0][q]), str(cols[1][q]), int(cols[2][q]))
        groups.setdefault(key, {}).setdefault(int(cols[3][q]), {})[int(cols[4][q])] = int(q)
    return groups


def _bag(study: StudyReadouts, by_rotation: dict[int, int]) -> tuple[object, ...]:
    """The multiset of context tokens of every rotation of an instance."""
    return tuple((r, tuple(sorted(study.queries[q].context_ids)))
                 for r, q in sorted(by_rotation.items()))


def order_swaps(study: StudyReadouts, select: Selection) -> list[Pair]:
    """Count-preserving order swaps (module docstring): within each (delivery, probe, turn),
    each episode with the next one of the same token counts whose contexts differ."""
    pairs: list[Pair] = []
    for _, by_ep in sorted(_groups(study, select.mask(study)).items()):
        bags: dict[tuple[object, ...], list[int]] = {}
        for e in sorted(by_ep):
            bags.setdefault(_bag(study, by_ep[e]), []).append(e)
        for eps in bags.values():
            for i, e in enumerate(eps):
                for step in range(1, len(eps)):
                    other = eps[(i + step) % len(eps)]
                    if _swappable(study, by_ep[e], by_ep[other]):
                        pairs.extend(Pair(by_ep[e][r], by_ep[other][r]) for r in sorted(by_ep[e]))
                        break
    return pairs


def _swappable(study: StudyReadouts, base: dict[int, int], source: dict[int, int]) -> bool:
    qs = study.queries
    if sorted(base) != sorted(source):
        return False
    if any(misalignment(qs[base[r]], qs[source[r]]) for r in base):
        return False
    return any(qs[base[r]].context_ids != qs[source[r]].context_ids for r in base)
