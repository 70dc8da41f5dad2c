"""Analysis: debiased beliefs, lens beliefs per layer, probes, divergences from the oracle,
statistics, the summary table, plots and the report.

Everything here is a pure function of an open cache file (``belieflens.open_cache``), reading
residuals in chunks so that files larger than memory work, and returns xarray objects with
named dimensions. The same functions hang off every cache Dataset as ``ds.bl`` (importing
this package registers the accessor: ``ds.bl.beliefs()``, ``ds.bl.divergence()``,
``ds.bl.summary()``, ``ds.bl.probe()``). Training a tuned lens needs a model and lives in
:mod:`belieflens.lens`.
"""

from belieflens.analysis import accessor, probes, stats, tuned_lens
from belieflens.analysis.accessor import BeliefLensAccessor
from belieflens.analysis.beliefs import by_instance, output_beliefs, point_estimates
from belieflens.analysis.calibration import reliability
from belieflens.analysis.divergence import chebyshev, js, kl, l1, mae, sym_kl, tvd
from belieflens.analysis.lens import (
    Lens,
    LogitLens,
    final_norm_of,
    has_continuations,
    lens_beliefs,
    lens_logits,
    lens_option_logprob,
)
from belieflens.analysis.position_bias import position_bias
from belieflens.analysis.probes import probe_layers, probe_layers_array
from belieflens.analysis.stats import (
    binomial_test,
    bootstrap_ci,
    mcnemar_test,
    paired_comparison,
    sem,
)
from belieflens.analysis.summary import SOURCES, summary
from belieflens.analysis.tuned_lens import TunedLens, load_tuned_lens

__all__ = [
    "SOURCES",
    "BeliefLensAccessor",
    "Lens",
    "LogitLens",
    "TunedLens",
    "accessor",
    "binomial_test",
    "bootstrap_ci",
    "by_instance",
    "chebyshev",
    "final_norm_of",
    "has_continuations",
    "js",
    "kl",
    "l1",
    "lens_beliefs",
    "lens_logits",
    "lens_option_logprob",
    "load_tuned_lens",
    "mae",
    "mcnemar_test",
    "output_beliefs",
    "paired_comparison",
    "point_estimates",
    "position_bias",
    "probe_layers",
    "probe_layers_array",
    "probes",
    "reliability",
    "sem",
    "stats",
    "summary",
    "sym_kl",
    "tuned_lens",
    "tvd",
]
