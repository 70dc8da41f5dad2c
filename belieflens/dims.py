"""The one glossary of dimension names.

The same strings name axes in jaxtyping annotations, HDF5 dimension scales and
xarray dims, so a reader meets one vocabulary everywhere:

- ``query``: one read-out (one probe under one Latin-square rotation, one turn, one episode)
- ``episode``, ``turn``, ``rotation``: what a read-out is, as coordinates on ``query``
- ``probe``, ``kind``, ``env``, ``delivery``: the read-out's probe name, its kind (``mcq`` or
  ``completion``), environment and delivery; coordinates on ``query``, and dimensions of
  analysis results (beliefs by ``delivery`` and ``probe``)
- ``option``: a position in the list of answers shown to the model (position order)
- ``outcome``: an answer's meaning, independent of where it was shown
- ``layer``: residual-stream layer; 0 = embeddings, l = output of block l-1
- ``d_model``: residual-stream width
- ``token``: a context token position
- ``cont_token``: a token position inside an option's continuation
- ``cont_extra``: continuation positions 0..n-2 whose residuals predict tokens 1..n-1
- ``vocab``: the model's vocabulary
- ``lens_token``: the subset of vocabulary rows stored for the offline logit lens
- ``text_token``: the vocabulary ids of a study (every id of ``input_ids`` and
  ``option_ids``) whose decoded text is stored, so that a viewer shows tokens without a
  tokenizer
- ``state``: a hidden state of a token-level process (or a bin of a coin's bias), the
  coordinates of the hidden-state belief ``belief_state``
- ``lag``: how many recent tokens a baseline of the belief-state geometry sees
- ``baseline``: a statistic baseline: the same read-out fitted on features of the evidence
  that the environment declares (counts, the turn, the last ``k`` observations) instead of
  the residual
- ``source``: where a belief is read (the output, the logit lens, a tuned lens, a probe)
- ``style``, ``case``, ``type``: analysis groupings (a simulator's story style, a judgment
  case, a recommender user type)
- ``model``: one model of several compared on the same study
- ``pair``, ``positions``, ``alpha``, ``fold``: interventions (a base/source pair of a patch,
  which positions are patched, a steering strength, a fold of a cross-fitted direction)
- ``rank``, ``draw``, ``step``: a learned subspace's basis vector, one random control drawn
  beside it, and a training step
"""

from __future__ import annotations

from typing import Final, Literal, get_args

Dim = Literal[
    "query",
    "episode",
    "turn",
    "rotation",
    "probe",
    "kind",
    "env",
    "delivery",
    "option",
    "outcome",
    "layer",
    "d_model",
    "token",
    "cont_token",
    "cont_extra",
    "vocab",
    "lens_token",
    "text_token",
    "state",
    "lag",
    "baseline",
    "source",
    "style",
    "case",
    "type",
    "model",
    "pair",
    "positions",
    "alpha",
    "fold",
    "rank",
    "draw",
    "step",
]
"""Every dimension name (the type of a dimension label)."""

QUERY: Final = "query"
EPISODE: Final = "episode"
TURN: Final = "turn"
ROTATION: Final = "rotation"
PROBE: Final = "probe"
KIND: Final = "kind"
ENV: Final = "env"
DELIVERY: Final = "delivery"
OPTION: Final = "option"
OUTCOME: Final = "outcome"
LAYER: Final = "layer"
D_MODEL: Final = "d_model"
TOKEN: Final = "token"
CONT_TOKEN: Final = "cont_token"
CONT_EXTRA: Final = "cont_extra"
VOCAB: Final = "vocab"
LENS_TOKEN: Final = "lens_token"
TEXT_TOKEN: Final = "text_token"
STATE: Final = "state"
LAG: Final = "lag"
BASELINE: Final = "baseline"
SOURCE: Final = "source"
STYLE: Final = "style"
CASE: Final = "case"
TYPE: Final = "type"
MODEL: Final = "model"
PAIR: Final = "pair"
POSITIONS: Final = "positions"
ALPHA: Final = "alpha"
FOLD: Final = "fold"
RANK: Final = "rank"
DRAW: Final = "draw"
STEP: Final = "step"

ALL: Final[tuple[Dim, ...]] = get_args(Dim)
"""Every dimension name, in glossary order."""


def dim(name: str) -> Dim:
    """``name`` as a :data:`Dim`, or :class:`ValueError` if it is not in the glossary."""
    for d in ALL:
        if d == name:
            return d
    raise ValueError(f"{name!r} is not a dimension name of belieflens.dims")
