"""Analysis: debiased beliefs, lens beliefs per layer, decoders, divergences from the oracle,
statistics, the summary table, plots and the report.

Everything here is a pure function of an open cache file (``belieflens.open_cache``), reading
residuals in chunks so that files larger than memory work, and returns xarray objects with
named dimensions. The same functions hang off every cache Dataset as ``ds.bl`` (importing
this package registers the accessor: ``ds.bl.beliefs()``, ``ds.bl.divergence()``,
``ds.bl.summary()``, ``ds.bl.decoders()``). Lenses themselves live in :mod:`belieflens.lens`;
training a tuned lens needs a model and lives in :mod:`belieflens.train.lens`.
"""

from belieflens.analysis import accessor, decoders, stats
from belieflens.analysis.accessor import BeliefLensAccessor
from belieflens.analysis.beliefs import by_instance, lens_beliefs, output_beliefs, point_estimates
from belieflens.analysis.calibration import reliability
from belieflens.analysis.decoders import decoder_layers, decoder_layers_array
from belieflens.analysis.divergence import chebyshev, js, kl, l1, mae, sym_kl, tvd
from belieflens.analysis.position_bias import position_bias
from belieflens.analysis.stats import (
    binomial_test,
    bootstrap_ci,
    mcnemar_test,
    paired_comparison,
    sem,
)
from belieflens.analysis.summary import SOURCES, summary

__all__ = [
    "SOURCES",
    "BeliefLensAccessor",
    "accessor",
    "binomial_test",
    "bootstrap_ci",
    "by_instance",
    "chebyshev",
    "decoder_layers",
    "decoder_layers_array",
    "decoders",
    "js",
    "kl",
    "l1",
    "lens_beliefs",
    "mae",
    "mcnemar_test",
    "output_beliefs",
    "paired_comparison",
    "point_estimates",
    "position_bias",
    "reliability",
    "sem",
    "stats",
    "summary",
    "sym_kl",
    "tvd",
]
