"""The one glossary of dimension names.

The same strings name axes in jaxtyping annotations, HDF5 dimension scales and
xarray dims, so a reader meets one vocabulary everywhere:

- ``query``: one read-out (one probe under one Latin-square rotation, one turn, one episode)
- ``episode``, ``turn``, ``rotation``: what a read-out is, as coordinates on ``query``
- ``option``: a position in the list of answers shown to the model (position order)
- ``outcome``: an answer's meaning, independent of where it was shown
- ``layer``: residual-stream layer; 0 = embeddings, l = output of block l-1
- ``d_model``: residual-stream width
- ``token``: a context token position
- ``cont_token``: a token position inside an option's continuation
- ``cont_extra``: continuation positions 0..n-2 whose residuals predict tokens 1..n-1
- ``vocab``: the model's vocabulary
- ``lens_token``: the subset of vocabulary rows stored for the offline logit lens
"""

from __future__ import annotations

from typing import Final

QUERY: Final = "query"
EPISODE: Final = "episode"
TURN: Final = "turn"
ROTATION: Final = "rotation"
OPTION: Final = "option"
OUTCOME: Final = "outcome"
LAYER: Final = "layer"
D_MODEL: Final = "d_model"
TOKEN: Final = "token"
CONT_TOKEN: Final = "cont_token"
CONT_EXTRA: Final = "cont_extra"
VOCAB: Final = "vocab"
LENS_TOKEN: Final = "lens_token"
PROBE: Final = "probe"

ALL: Final = (
    QUERY,
    EPISODE,
    TURN,
    ROTATION,
    OPTION,
    OUTCOME,
    LAYER,
    D_MODEL,
    TOKEN,
    CONT_TOKEN,
    CONT_EXTRA,
    VOCAB,
    LENS_TOKEN,
    PROBE,
)
