"""The token-level environments' analysis section: the model's cross-entropy against the
optimal predictor's, and the belief-state geometry with its controls and a simplex figure.

For ``coin-tokens`` the regression target is the posterior mean (the next-flip oracle) and
the recent-token baselines include the last 8 flips; for the hidden Markov processes it is the
belief over the hidden states (``belief_state``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.compare import updating_slope
from belieflens.analysis.divergence import tvd_values
from belieflens.analysis.geometry import (
    DEFAULT_LAGS,
    cross_entropy,
    geometry,
    next_token_features,
    regressed,
)
from belieflens.dims import EPISODE, TURN
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

COIN = "coin-tokens"
"""The one token-level environment whose target is the next-token oracle (posterior mean)."""

FIGURE = "belief_simplex.png"
"""The simplex figure's file name in the output folder."""


def settings(ds: xr.Dataset) -> tuple[str, tuple[int, ...]]:
    """The regression target and the baselines' lags for this file's environment."""
    env = str(ds.attrs.get("env_name", ""))
    if env == COIN:
        return "oracle", (*DEFAULT_LAGS, 8)
    return "belief_state", DEFAULT_LAGS


def format_geometry(g: xr.Dataset) -> str:
    """The geometry as plain text: R² per layer beside its shuffled control, the
    concatenation, the next-token regressor and the recent-token baselines."""
    lines = [f"target: {g.attrs['target']}  ({g.attrs['n_episodes']} sequences, "
             f"{g.attrs['n_folds']} folds of whole sequences; held-out R², MSE)",
             "layer        R2      MSE   R2 shuffled"]
    for layer in g["layer"].values:
        s = g.sel(layer=layer)
        lines.append(f"{int(layer):>5}  {float(s.r2):8.4f} {float(s.mse):8.5f} "
                     f"{float(s.r2_shuffled):8.4f}")
    lines.append(f"{'concat':>5}  {float(g.r2_concat):8.4f} {float(g.mse_concat):8.5f} "
                 f"{float(g.r2_concat_shuffled):8.4f}")
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


def simplex_figure(ds: xr.Dataset, out: Path, *, target: str, seed: int = 0) -> Path:
    """The true beliefs beside the held-out regressed ones (all layers concatenated), both
    coloured by the true belief: the 2-simplex for 3 states, else the true beliefs' first two
    principal axes (one axis against the turn for a 2-outcome target)."""
    pred = regressed(ds, np.random.default_rng(seed), target=target)
    true = np.asarray(ds[target].values, dtype=np.float64)[:, : pred.sizes["state"]]
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
    fig.suptitle(f"{ds.attrs.get('env_name', '')}: {target}, colour = true belief", fontsize=10)
    return save(fig, out, tight=True)


def tokens_section(ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod) -> Section:
    """The token-level section: cross-entropy per position, then the belief-state geometry
    (``method`` is unused: a token read-out has no rotations)."""
    target, lags = settings(ds)
    g = geometry(ds, np.random.default_rng(0), target=target, lags=lags)
    agree = output_agreement(ds)
    text = (f"output vs oracle: mean TVD {float(agree.tvd_mean):.4f}; updating slope of "
            f"P(first symbol) {float(agree.slope):.3f} ± {float(agree.slope_se):.3f} "
            f"({int(agree.steps)} steps)\n\n"
            + format_cross_entropy(cross_entropy(ds)) + "\n\n" + format_geometry(g))
    md = f"```\n{text}\n```\n"
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        files = (simplex_figure(ds, out_dir / FIGURE, target=target),)
        md += f"\n![belief geometry]({FIGURE})\n"
    return Section(title="Token-level process: cross-entropy and belief geometry", text=text,
                   markdown=md, files=files)


SECTIONS = (tokens_section,)
"""The sections of every token-level environment."""
