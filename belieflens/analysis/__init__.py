"""Analysis: debiased beliefs, lens beliefs per layer, divergences from the oracle, plots."""

from belieflens.analysis.divergence import chebyshev, js, kl, l1, mae, sym_kl, tvd

__all__ = ["chebyshev", "js", "kl", "l1", "mae", "sym_kl", "tvd"]
