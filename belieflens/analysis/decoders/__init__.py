"""Linear decoders on the residual stream: ridge for scalars, softmax regression for distributions.

A decoder reads an oracle quantity (a posterior mean, log-odds, or a whole posterior
over outcomes) linearly from the residual at the answer position, one layer at a
time. The question is *where* such a read-out becomes possible, so every score is:

- **held out**: cross-validation grouped by episode (:func:`group_folds`); the
  read-outs of one episode (its turns and rotations share a context) are never
  split between train and test;
- **against a control task**: the same decoder fitted to targets shuffled at the
  episode level (:func:`shuffle_by_group`); ``selectivity`` = score − control score
  (for losses such as KL: control − score), so a decoder that merely memorises is not
  mistaken for one that finds a representation (Hewitt & Liang, 2019).

Fitting streams: :class:`RidgeFitter` accumulates sufficient statistics with
``update(X, y)`` (one pass, numerically stable merges of centred moments);
:class:`SoftmaxFitter` runs L-BFGS over a batch iterator factory (one pass per
function evaluation). Both give a frozen decoder that saves to ``.npz`` with its
provenance as JSON. :func:`decoder_layers` runs both per layer over a cache file's
``resid`` (dims ``query, layer, d_model``), reading ``query`` chunks, so files
larger than memory work.

Features are standardised with training statistics; ``lam`` is the L2 penalty in
those units on the mean loss (ridge: (1/n) Σ residual² + lam ‖w‖²; softmax: mean
cross-entropy + lam/2 ‖W‖²).
"""

from belieflens.analysis.decoders.folds import fold_split, group_folds, shuffle_by_group
from belieflens.analysis.decoders.io import Decoder, load_decoder, save_decoder
from belieflens.analysis.decoders.layers import decoder_layers, decoder_layers_array
from belieflens.analysis.decoders.provenance import DecoderKind, DecoderProvenance
from belieflens.analysis.decoders.ridge import (
    DEFAULT_LAMBDAS,
    RidgeCV,
    RidgeDecoder,
    RidgeFitter,
    RidgeStats,
)
from belieflens.analysis.decoders.softmax import (
    Batch,
    BatchFactory,
    SoftmaxCV,
    SoftmaxDecoder,
    SoftmaxFitter,
    cross_validate_softmax,
)

__all__ = [
    "DEFAULT_LAMBDAS",
    "Batch",
    "BatchFactory",
    "Decoder",
    "DecoderKind",
    "DecoderProvenance",
    "RidgeCV",
    "RidgeDecoder",
    "RidgeFitter",
    "RidgeStats",
    "SoftmaxCV",
    "SoftmaxDecoder",
    "SoftmaxFitter",
    "cross_validate_softmax",
    "decoder_layers",
    "decoder_layers_array",
    "fold_split",
    "group_folds",
    "load_decoder",
    "save_decoder",
    "shuffle_by_group",
]
