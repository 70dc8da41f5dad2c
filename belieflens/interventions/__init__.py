"""Causal tests of where a belief lives: interchange patching, steering and erasure.

Each intervention re-runs a study file's own read-outs (:mod:`belieflens.interventions.study`)
through its model with the residual stream edited at one layer, and writes a result file
that opens with plain xarray (:mod:`belieflens.interventions.results`):

- :func:`patch`: the source read-out's residual patched into the base run over a position
  set (``patched_logprob[pair, layer, positions, option]``);
- :func:`steer`: α times the ridge probe's direction added at the answer position
  (``steered_logprob[query, layer, alpha, option]``), against random directions;
- :func:`erase`: LEACE erasure of the oracle concept at the answer position
  (``erased_logprob[query, layer, option]``), against a random subspace of equal rank.

:func:`belieflens.report.interventions.report` turns a result file into tables, heatmaps
and a Markdown section.
"""

from belieflens.interventions.erase import EraseOptions, erase, erase_logprobs
from belieflens.interventions.pairs import POSITION_SETS, Pair, PositionSet, pair_instances
from belieflens.interventions.patch import PatchOptions, patch, patch_logprobs
from belieflens.interventions.steer import SteerOptions, steer, steer_logprobs
from belieflens.interventions.study import Study, read_study

__all__ = [
    "POSITION_SETS",
    "EraseOptions",
    "Pair",
    "PatchOptions",
    "PositionSet",
    "SteerOptions",
    "Study",
    "erase",
    "erase_logprobs",
    "pair_instances",
    "patch",
    "patch_logprobs",
    "read_study",
    "steer",
    "steer_logprobs",
]
