"""Lenses: one way in to reading a layer's residual through the model's head.

- :class:`Lens` (a Protocol: ``name``, ``transform(resid)``, ``check_file(ds)``), with
  :class:`LogitLens` (``transform`` = identity) and :class:`TunedLens` (per-layer affine
  translators) as its implementations;
- :class:`Head`: the final norm and the unembedding, one formula for numpy and torch;
- training a tuned lens on a loaded model: :func:`collect_positions` (residuals at sampled
  positions of the environments' contexts), :func:`train_tuned_lens`, :func:`kl_per_layer`,
  then :func:`save_tuned_lens` / :func:`load_tuned_lens`.

Applying a lens to a cache file needs no model: ``lens_beliefs(ds, lens=...)`` in
:mod:`belieflens.analysis.lens`, or ``ds.bl.beliefs(source=lens)``. Layering: this package
may import :mod:`belieflens.analysis`; analysis never imports it.
"""

from belieflens.analysis.lens import Lens, LogitLens
from belieflens.analysis.tuned_lens.lens import (
    TunedLens,
    TunedLensConfig,
    TunedLensError,
    identity_lens,
    load_tuned_lens,
    save_tuned_lens,
)
from belieflens.cache.lens_params import FinalNorm, Head, unembed_hash
from belieflens.lens.data import DEFAULT_ENVS, Positions, collect_positions
from belieflens.lens.train import TrainOptions, TrainResult, kl_per_layer, train_tuned_lens

__all__ = [
    "DEFAULT_ENVS",
    "FinalNorm",
    "Head",
    "Lens",
    "LogitLens",
    "Positions",
    "TrainOptions",
    "TrainResult",
    "TunedLens",
    "TunedLensConfig",
    "TunedLensError",
    "collect_positions",
    "identity_lens",
    "kl_per_layer",
    "load_tuned_lens",
    "save_tuned_lens",
    "train_tuned_lens",
    "unembed_hash",
]
