"""The token-level environments' analysis section: the model's cross-entropy against the
optimal predictor's, and the belief-state geometry with its controls and a simplex figure.

The geometry is reported for every target the process defines (:func:`targets`): for
``coin-tokens`` the posterior mean (the next-flip oracle), the full posterior over the bias's
bins (``belief_state``) and the posterior variance, with the last 8 flips among the
recent-token baselines; for the hidden Markov processes the full belief over the hidden
states. The posterior mean is what an untrained network of the same shape already reads
(near-uniform attention averages the flips): :data:`FIGURE_TARGET` names, per process, the
target the figure shows, one an untrained network does not give.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.compare import updating_slope
from belieflens.analysis.divergence import tvd_values
from belieflens.analysis.geometry import (
    DEFAULT_LAGS,
    Target,
    cross_entropy,
    geometry,
    next_token_features,
    regressed,
    target_of,
)
from belieflens.dims import EPISODE, TURN
from belieflens.envs.tokens.coin import CoinTokens
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

COIN = CoinTokens.name
"""The one token-level environment whose target is the next-token oracle (posterior mean)."""

FIGURE = "belief_simplex.png"
"""The simplex figure's file name in the output folder."""


BELIEF = "belief"
"""The full belief vector over the hidden states (every token-level process)."""

POSTERIOR_MEAN, POSTERIOR_BINS, POSTERIOR_VARIANCE = (
    "posterior mean", "posterior over bins", "posterior variance")
"""The coin's targets."""

FIGURE_TARGET: dict[str, str] = {COIN: POSTERIOR_BINS}
"""The target of the simplex figure per environment (default: :data:`BELIEF`)."""


def _coin_params(ds: xr.Dataset) -> tuple[float, float]:
    raw = ds.attrs.get("env_params", "{}")
    params = json.loads(str(raw)) if not isinstance(raw, dict) else raw
    return float(params.get("a", 1.0)), float(params.get("b", 1.0))


def targets(ds: xr.Dataset) -> dict[str, Target]:
    """Every regression target this file's process defines, by name: for ``coin-tokens`` the
    posterior mean (``oracle``: P(heads), P(tails)), the posterior over the bias's bins
    (``belief_state``) and the posterior variance (exact: the Beta posterior's
    ``m(1 - m) / (a + b + n + 1)`` after ``n`` flips with mean ``m``); for the others the
    belief over the hidden states (``belief_state``)."""
    if str(ds.attrs.get("env_name", "")) != COIN:
        return {BELIEF: target_of(ds, "belief_state")}
    mean = target_of(ds, "oracle")
    a, b = _coin_params(ds)
    m = mean.values[:, 0]
    n = np.asarray(ds[TURN].values, dtype=np.float64)
    var = (m * (1.0 - m) / (a + b + n + 1.0))[:, None]
    return {POSTERIOR_MEAN: Target(mean.values, mean.labels, POSTERIOR_MEAN),
            POSTERIOR_BINS: dataclasses.replace(target_of(ds, "belief_state"),
                                                name=POSTERIOR_BINS),
            POSTERIOR_VARIANCE: Target(var, ("variance",), POSTERIOR_VARIANCE)}


def lags(ds: xr.Dataset) -> tuple[int, ...]:
    """The recent-token baselines' lags for this file's environment (8 too for the coin)."""
    return (*DEFAULT_LAGS, 8) if str(ds.attrs.get("env_name", "")) == COIN else DEFAULT_LAGS


def format_geometry(g: xr.Dataset) -> str:
    """The geometry as plain text: R² per layer beside its permutation null (mean and
    p-value) and the penalty chosen (median over folds), the concatenation, the next-token
    regressor and the recent-token baselines."""
    lines = [f"target: {g.attrs['target']}  ({g.attrs['n_episodes']} sequences, "
             f"{g.attrs['n_folds']} folds of whole sequences; held-out R², MSE; ridge on "
             f"standardised features, lambda by nested CV; null: {g.attrs['permutations']} "
             "permutations of whole trajectories)",
             "layer        R2      MSE   R2 null  p-value   lambda"]
    for layer in g["layer"].values:
        s = g.sel(layer=layer)
        lines.append(f"{int(layer):>5}  {float(s.r2):8.4f} {float(s.mse):8.5f} "
                     f"{float(s.r2_shuffled):8.4f} {float(s.p_value):8.3f} "
                     f"{float(np.median(s.lam)):8.2g}")
    lines.append(f"{'concat':>5}  {float(g.r2_concat):8.4f} {float(g.mse_concat):8.5f} "
                 f"{float(g.r2_concat_shuffled):8.4f} {float(g.p_value_concat):8.3f} "
                 f"{float(np.median(g.lam_concat)):8.2g}")
    lines.append(f"next-token distribution -> target: R2 {float(g.r2_next_token):.4f}, "
                 f"MSE {float(g.mse_next_token):.5f}")
    lines.append("last-k tokens:  k  linear(+position)  lookup")
    for k in g["lag"].values:
        s = g.sel(lag=k)
        lines.append(f"               {int(k):>2}  {float(s.r2_linear_last):8.4f}  "
                     f"{float(s.r2_lookup_last):14.4f}")
    return "\n".join(lines)


def format_cross_entropy(ce: xr.Dataset) -> str:
    """Cross-entropy per position: the model's, the optimal predictor's, their ratio."""
    lines = ["turn   model CE  optimal CE   ratio"]
    for t in ce[TURN].values:
        s = ce.sel({TURN: t})
        lines.append(f"{int(t):>4} {float(s.model):10.4f} {float(s.optimal):11.4f} "
                     f"{float(s.ratio):7.4f}")
    return "\n".join(lines)


def output_agreement(ds: xr.Dataset) -> xr.Dataset:
    """The output's next-token distribution against the oracle: mean TVD over every read-out
    (``tvd_mean``), and the updating slope of the first symbol's probability (the coin's
    P(heads)) on the oracle's, with its episode-clustered SE (``slope``, ``slope_se``;
    :func:`~belieflens.analysis.compare.updating_slope`)."""
    k = len([s for s in np.asarray(ds["outcome_label"].values)[0] if str(s)])
    model = next_token_features(ds)[:, :k]
    oracle = np.asarray(ds["oracle"].values, dtype=np.float64)[:, :k]
    tvd = tvd_values(model, oracle, axis=1)
    ep, turn = np.asarray(ds[EPISODE].values), np.asarray(ds[TURN].values)
    eps, turns = np.unique(ep), np.unique(turn)
    grid_m = np.full((eps.size, turns.size), np.nan)
    grid_o = np.full_like(grid_m, np.nan)
    grid_m[np.searchsorted(eps, ep), np.searchsorted(turns, turn)] = model[:, 0]
    grid_o[np.searchsorted(eps, ep), np.searchsorted(turns, turn)] = oracle[:, 0]
    slope, se, n = updating_slope(grid_m, grid_o)
    return xr.Dataset({"tvd_mean": float(tvd.mean()), "slope": slope, "slope_se": se,
                       "steps": n})


def simplex_figure(ds: xr.Dataset, out: Path, *, target: str | Target,
                   seed: int = 0) -> Path:
    """The true beliefs beside the held-out regressed ones (all layers concatenated), both
    coloured by the true belief: the 2-simplex for 3 states, else the true beliefs' first two
    principal axes (one axis against the turn for a 2-outcome target)."""
    tgt = target_of(ds, target)
    pred = regressed(ds, np.random.default_rng(seed), target=tgt)
    true = tgt.values[:, : pred.sizes["state"]]
    fit = np.asarray(pred.values)
    k = true.shape[1]
    if k == 3:
        corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])
        pa, pb = true @ corners, fit @ corners
        colour = np.clip(true, 0, 1)
    elif k == 2:
        turn = np.asarray(ds[TURN].values, dtype=np.float64)
        pa = np.stack([turn, true[:, 0]], axis=1)
        pb = np.stack([turn, fit[:, 0]], axis=1)
        colour = np.stack([true[:, 0], 0.2 * np.ones(len(true)), 1 - true[:, 0]], axis=1)
    else:
        mean = true.mean(axis=0)
        _, _, vt = np.linalg.svd(true - mean, full_matrices=False)
        pa, pb = (true - mean) @ vt[:2].T, (fit - mean) @ vt[:2].T
        c = (true - mean) @ vt[:3].T if vt.shape[0] >= 3 else np.pad(pa, ((0, 0), (0, 1)))
        colour = (c - c.min(axis=0)) / np.maximum(np.ptp(c, axis=0), 1e-12)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), sharex=True, sharey=True)
    for ax, pts, title in ((axes[0], pa, "true belief"),
                           (axes[1], pb, "regressed from the residual (held out)")):
        ax.scatter(pts[:, 0], pts[:, 1], c=colour, s=2, alpha=0.6, linewidths=0)
        ax.set_title(title, fontsize=10)
        ax.set_aspect("equal" if k == 3 else "auto")
    fig.suptitle(f"{ds.attrs.get('env_name', '')}: {tgt.name}, colour = true belief",
                 fontsize=10)
    return save(fig, out, tight=True)


def tokens_section(ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod) -> Section:
    """The token-level section: cross-entropy per position, then the belief-state geometry
    (``method`` is unused: a token read-out has no rotations)."""
    named = targets(ds)
    geometries = [geometry(ds, np.random.default_rng(0), target=t, lags=lags(ds))
                  for t in named.values()]
    agree = output_agreement(ds)
    text = (f"output vs oracle: mean TVD {float(agree.tvd_mean):.4f}; updating slope of "
            f"P(first symbol) {float(agree.slope):.3f} ± {float(agree.slope_se):.3f} "
            f"({int(agree.steps)} steps)\n\n"
            + format_cross_entropy(cross_entropy(ds)) + "\n\n"
            + "\n\n".join(format_geometry(g) for g in geometries))
    md = f"```\n{text}\n```\n"
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        shown = named[FIGURE_TARGET.get(str(ds.attrs.get("env_name", "")), BELIEF)]
        files = (simplex_figure(ds, out_dir / FIGURE, target=shown),)
        md += f"\n![belief geometry]({FIGURE})\n"
    return Section(title="Token-level process: cross-entropy and belief geometry", text=text,
                   markdown=md, files=files)


SECTIONS = (tokens_section,)
"""The sections of every token-level environment."""
