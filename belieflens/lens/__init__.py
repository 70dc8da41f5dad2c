"""Lenses: reading any layer's residual through the model's head, without a model.

- :class:`Lens`, the one Protocol (``name``, ``transform(resid)``, ``check_file(ds)``), with
  :class:`LogitLens` (``transform`` is the identity) and :class:`TunedLens` (per-layer affine
  translators, after tuned-lens) as its implementations;
- :class:`Head`: the final norm and the unembedding, one formula for numpy and torch, read
  from a cache file (:meth:`Head.from_dataset`) or a loaded model (:meth:`Head.from_model`).

- :mod:`.apply`: a lens applied to a cache file's residuals, each layer's scores of the
  answer options (:func:`~.apply.lens_logits`, :func:`~.apply.lens_option_logprob`), read a
  block of queries at a time.

Debiasing those scores over rotations into beliefs is analysis
(:func:`belieflens.analysis.beliefs.lens_beliefs`, ``ds.bl.beliefs(source=lens)``); training a
tuned lens needs a model and lives in :mod:`belieflens.train.lens`. This package imports
neither.
"""

from belieflens.lens.apply import (
    MultiToken,
    final_norm_of,
    has_continuations,
    lens_logits,
    lens_option_logprob,
    query_blocks,
)
from belieflens.lens.base import Lens, LogitLens
from belieflens.lens.head import FinalNorm, Head, final_norm, unembed_hash, unembedding
from belieflens.lens.tuned import (
    TunedLens,
    TunedLensConfig,
    TunedLensError,
    identity_lens,
    load_tuned_lens,
    parse_lens_spec,
    save_tuned_lens,
)

__all__ = [
    "FinalNorm",
    "Head",
    "Lens",
    "LogitLens",
    "MultiToken",
    "TunedLens",
    "TunedLensConfig",
    "TunedLensError",
    "final_norm",
    "final_norm_of",
    "has_continuations",
    "identity_lens",
    "lens_logits",
    "lens_option_logprob",
    "load_tuned_lens",
    "parse_lens_spec",
    "query_blocks",
    "save_tuned_lens",
    "unembed_hash",
    "unembedding",
]
