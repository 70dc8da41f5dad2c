"""Lenses: reading any layer's residual through the model's head, without a model.

- :class:`Lens`, the one Protocol (``name``, ``transform(resid)``, ``check_file(ds)``), with
  :class:`LogitLens` (``transform`` is the identity) and :class:`TunedLens` (per-layer affine
  translators, after tuned-lens) as its implementations;
- :class:`Head`: the final norm and the unembedding, one formula for numpy and torch, read
  from a cache file (:meth:`Head.from_dataset`) or a loaded model (:meth:`Head.from_model`).

Applying a lens to a cache file is analysis (``ds.bl.beliefs(source=lens)``,
:func:`belieflens.analysis.lens.lens_beliefs`); training a tuned lens needs a model and lives
in :mod:`belieflens.train.lens`. This package imports neither.
"""

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
    "TunedLens",
    "TunedLensConfig",
    "TunedLensError",
    "final_norm",
    "identity_lens",
    "load_tuned_lens",
    "parse_lens_spec",
    "save_tuned_lens",
    "unembed_hash",
    "unembedding",
]
