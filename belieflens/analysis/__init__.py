"""Analysis: debiased beliefs, lens beliefs per layer, probes, divergences from the oracle,
statistics, the summary table, plots and the report.

Everything here is a pure function of an open cache file (``belieflens.open_cache``), reading
residuals in chunks so that files larger than memory work.
"""

from belieflens.analysis import probes, stats, tuned_lens
from belieflens.analysis.beliefs import output_beliefs, point_estimates
from belieflens.analysis.calibration import reliability
from belieflens.analysis.divergence import chebyshev, js, kl, l1, mae, sym_kl, tvd
from belieflens.analysis.lens import (
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
from belieflens.analysis.tuned_lens import TunedLens, load_tuned_lens, train_tuned_lens

__all__ = [
    "SOURCES",
    "TunedLens",
    "binomial_test",
    "bootstrap_ci",
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
    "train_tuned_lens",
    "tuned_lens",
    "tvd",
]
