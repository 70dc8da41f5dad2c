"""The tuned lens: per-layer affine translators into the model's final residual space.

Following Belrose et al. (2023, the ``tuned-lens`` package), layer ``l``'s residual
``h`` is mapped to ``h + A_l h + b_l`` (a *residual* parametrisation, initialised
at ``A_l = 0, b_l = 0`` so that training starts from the logit lens) and then read
through the model's own head (final norm recomputed on the translated residual,
then the unembedding). ``A_l, b_l`` minimise KL(final ‖ lens_l): the divergence
of the lens's next-token distribution from the model's own final distribution,
over token positions. The last layer keeps the identity: there the logit lens is
the model's output.

No external corpus is reachable, so training positions come from the contexts
the environments generate (:func:`collect_positions`): their chat-templated
queries are rendered with the model's tokenizer and run through the bridge with
hooks that copy every layer's residual at sampled positions (positions with the
same token prefix are counted once).

A trained lens is saved to a folder (``config.json`` + ``translators.npz``) with
the model id, revision, weights hash and an unembedding hash; loading it onto
another model, or applying it to a cache file of another model, raises
:class:`TunedLensError`.
"""

from belieflens.analysis.tuned_lens.data import Positions, collect_positions
from belieflens.analysis.tuned_lens.head import Head, unembed_hash
from belieflens.analysis.tuned_lens.lens import (
    TunedLens,
    TunedLensConfig,
    TunedLensError,
    load_tuned_lens,
    save_tuned_lens,
)
from belieflens.analysis.tuned_lens.train import (
    TrainOptions,
    TrainResult,
    kl_per_layer,
    train_tuned_lens,
)

__all__ = [
    "Head",
    "Positions",
    "TrainOptions",
    "TrainResult",
    "TunedLens",
    "TunedLensConfig",
    "TunedLensError",
    "collect_positions",
    "kl_per_layer",
    "load_tuned_lens",
    "save_tuned_lens",
    "train_tuned_lens",
    "unembed_hash",
]
