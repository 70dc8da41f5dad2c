"""The tuned lens: per-layer affine translators into the model's final residual space.

Following Belrose et al. (2023, the ``tuned-lens`` package), layer ``l``'s residual
``h`` is mapped to ``h + A_l h + b_l`` (a *residual* parametrisation, initialised
at ``A_l = 0, b_l = 0`` so that training starts from the logit lens) and then read
through the model's own head (:class:`~belieflens.cache.lens_params.Head`: the final norm
recomputed on the translated residual, then the unembedding). ``A_l, b_l`` minimise
KL(final ‖ lens_l): the divergence of the lens's next-token distribution from the model's
own final distribution, over token positions. The last layer keeps the identity: there the
logit lens is the model's output.

This package holds what analysis needs without a model: :class:`TunedLens` (a
:class:`~belieflens.analysis.lens.Lens`), its provenance, saving and loading. Training
needs a model and lives in :mod:`belieflens.lens` (``train_tuned_lens``,
``collect_positions``).

A trained lens is saved to a folder (``config.json`` + ``translators.npz``) with
the model id, revision, weights hash and an unembedding hash; loading it onto
another model, or applying it to a cache file of another model, raises
:class:`TunedLensError`.
"""

from belieflens.analysis.tuned_lens.lens import (
    TunedLens,
    TunedLensConfig,
    TunedLensError,
    identity_lens,
    load_tuned_lens,
    parse_lens_spec,
    save_tuned_lens,
)
from belieflens.cache.lens_params import Head, unembed_hash

__all__ = [
    "Head",
    "TunedLens",
    "TunedLensConfig",
    "TunedLensError",
    "identity_lens",
    "load_tuned_lens",
    "parse_lens_spec",
    "save_tuned_lens",
    "unembed_hash",
]
