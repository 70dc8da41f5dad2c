"""Causal tests of where a belief lives: interchange patching, steering and erasure.

Each intervention re-runs a study file's own read-outs
(:mod:`belieflens.interventions.readouts`) through its model with the residual stream edited
at one layer, and writes a result file that opens with plain xarray
(:mod:`belieflens.interventions.results`). Its options record
says which (:func:`intervene` runs any of them; :func:`belieflens.patch`,
:func:`belieflens.steer` and :func:`belieflens.erase` name each):

- :class:`PatchOptions`: the source read-out's residual patched into the base run over a
  position set (``patched_logprob[pair, layer, positions, option]``);
- :class:`SteerOptions`: α times the ridge decoder's direction added at the answer position
  (``steered_logprob[query, layer, alpha, option]``), against random directions;
- :class:`EraseOptions`: LEACE erasure of the oracle concept at the answer position
  (``erased_logprob[query, layer, option]``), against a random subspace of equal rank;
- :class:`InterchangeOptions`: a rank-k subspace at the answer position learned by
  interchange (DAS) on training episodes and swapped from source to base on held-out pairs
  (``swapped_logprob[model, pair, layer, option]``), against random subspaces of that rank
  and the same procedure on untrained networks.

A :class:`Selection` names the read-outs to run. :func:`belieflens.report.interventions.report`
turns a result file into tables, heatmaps and a Markdown section.
"""

from belieflens.interventions.erase import ERASE_AT, EraseAt, EraseOptions, erase_logprobs
from belieflens.interventions.interchange import InterchangeOptions, interchange_logprobs
from belieflens.interventions.pairs import (
    POSITION_SETS,
    Pair,
    PositionSet,
    pair_instances,
    parse_pair,
)
from belieflens.interventions.patch import PatchOptions, patch_logprobs
from belieflens.interventions.readouts import Selection, StudyReadouts, read_study
from belieflens.interventions.run import Intervention, Plan, RunKeywords, intervene
from belieflens.interventions.steer import (
    DEFAULT_ALPHAS,
    DIRECTIONS,
    STEER_AT,
    DirectionKind,
    SteerAt,
    SteerOptions,
    steer_logprobs,
)

__all__ = [
    "DEFAULT_ALPHAS",
    "DIRECTIONS",
    "ERASE_AT",
    "POSITION_SETS",
    "STEER_AT",
    "DirectionKind",
    "EraseAt",
    "EraseOptions",
    "InterchangeOptions",
    "Intervention",
    "Pair",
    "PatchOptions",
    "Plan",
    "PositionSet",
    "RunKeywords",
    "Selection",
    "SteerAt",
    "SteerOptions",
    "StudyReadouts",
    "erase_logprobs",
    "interchange_logprobs",
    "intervene",
    "pair_instances",
    "parse_pair",
    "patch_logprobs",
    "read_study",
    "steer_logprobs",
]
