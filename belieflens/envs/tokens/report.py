"""The token-level environments' analysis section: the model's cross-entropy against the
optimal predictor's, and the belief-state geometry with its controls and a simplex figure,
formatted from :mod:`belieflens.envs.tokens.metrics` (which says which targets each process
reports, and which one the figure shows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from belieflens.analysis.geometry import cross_entropy
from belieflens.dims import TURN
from belieflens.envs.tokens.metrics import (
    figure_target,
    geometries,
    output_agreement,
    simplex_points,
)
from belieflens.report.figures import pyplot, save
from belieflens.report.section import Section
from belieflens.types import DebiasMethod

FIGURE = "belief_simplex.png"
"""The simplex figure's file name in the output folder."""


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


def simplex_figure(points: xr.Dataset, out: Path, *, title: str) -> Path:
    """The true beliefs beside the held-out regressed ones of
    :func:`~belieflens.envs.tokens.metrics.simplex_points`, both coloured by the true belief:
    the 2-simplex for 3 states, else the true beliefs' first two principal axes (one axis
    against the turn for a 2-outcome target)."""
    true = np.asarray(points["true"].values)
    fit = np.asarray(points["fitted"].values)
    k = true.shape[1]
    if k == 3:
        corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])
        pa, pb = true @ corners, fit @ corners
        colour = np.clip(true, 0, 1)
    elif k == 2:
        turn = np.asarray(points["turn"].values)
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
    for ax, pts, panel in ((axes[0], pa, "true belief"),
                           (axes[1], pb, "regressed from the residual (held out)")):
        ax.scatter(pts[:, 0], pts[:, 1], c=colour, s=2, alpha=0.6, linewidths=0)
        ax.set_title(panel, fontsize=10)
        ax.set_aspect("equal" if k == 3 else "auto")
    fig.suptitle(title, fontsize=10)
    return save(fig, out, tight=True)


def tokens_section(ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod) -> Section:
    """The token-level section: cross-entropy per position, then the belief-state geometry
    (``method`` is unused: a token read-out has no rotations)."""
    geoms = geometries(ds)
    agree = output_agreement(ds)
    text = (f"output vs oracle: mean TVD {float(agree.tvd_mean):.4f}; updating slope of "
            f"P(first symbol) {float(agree.slope):.3f} ± {float(agree.slope_se):.3f} "
            f"({int(agree.steps)} steps)\n\n"
            + format_cross_entropy(cross_entropy(ds)) + "\n\n"
            + "\n\n".join(format_geometry(g.to_dataset()) for g in geoms.children.values()))
    md = f"```\n{text}\n```\n"
    files: tuple[Path, ...] = ()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        points = simplex_points(ds, target=figure_target(ds))
        title = f"{ds.attrs.get('env_name', '')}: {points.attrs['target']}, colour = true belief"
        files = (simplex_figure(points, out_dir / FIGURE, title=title),)
        md += f"\n![belief geometry]({FIGURE})\n"
    return Section(title="Token-level process: cross-entropy and belief geometry", text=text,
                   markdown=md, files=files)


SECTIONS = (tokens_section,)
"""The sections of every token-level environment."""
