"""Test helper: synthetic coin-flip studies with planted residuals.

Each episode flips a coin of a random bias; each turn's read-out asks for the next flip (two
rotations, the oracle the Beta(1, 1) posterior predictive). Each layer's residual is one of:

- ``bag``: the mean of the embeddings of the faces seen so far (the bag of tokens an
  untrained network's near-uniform attention gives), the faces' embeddings either the same
  in every episode (``names="fixed"``, "heads"/"tails") or drawn per episode (``"random"``);
- ``belief``: a fixed random projection of the posterior and the turn, whatever the faces
  are called (a belief bound to the evidence's meaning);
- ``output``: a fixed random projection of the model's output belief (``output``);
- ``noise``: nothing.

The output belief (what the option log-probs debias to) is the oracle or a planted function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from tests.analysis.synthetic_cache import cache_dataset, mcq_rows

F64 = NDArray[np.float64]
Layer = Literal["bag", "belief", "output", "noise"]
Output = Callable[[int, int, int], float]
"""The planted output P(first face) of (episode, heads so far, turn)."""

D = 12


def _flips(episodes: int, turns: int, seed: int) -> NDArray[np.bool_]:
    rng = np.random.default_rng(seed)
    theta = rng.uniform(0.05, 0.95, size=episodes)
    return np.asarray(rng.random((episodes, turns)) < theta[:, None])


def coin_study(layers: Sequence[Layer], *, names: Literal["fixed", "random"] = "fixed",
               episodes: int = 24, turns: int = 6, seed: int = 0, net: int = 0,
               output: Output | None = None, noise: float = 0.01,
               attrs: dict[str, object] | None = None) -> xr.Dataset:
    """A study of ``episodes`` episodes of ``turns`` flips (the flips of ``seed``), residuals
    per ``layers`` from the network ``net`` (its embeddings and projections), the output
    belief ``output`` (default: the oracle)."""
    flips = _flips(episodes, turns, seed)
    weights = np.random.default_rng(1000 + net)
    proj = weights.normal(size=(2, D))
    out_proj = weights.normal(size=(1, D))
    fixed = weights.normal(size=(2, D))
    names_rng = np.random.default_rng(2000 + seed)
    noise_rng = np.random.default_rng(3000 + seed + 17 * net)
    rows, feats = [], []
    for e in range(episodes):
        emb = fixed if names == "fixed" else names_rng.normal(size=(2, D))
        for t in range(turns + 1):
            h = int(flips[e, :t].sum())
            p = (1 + h) / (2 + t)
            belief = p if output is None else output(e, h, t)
            new = mcq_rows([belief, 1 - belief], episode=e, turn=t, probe="next-flip",
                           labels=("heads", "tails"), delivery="multi-turn",
                           oracle=[p, 1 - p])
            per = {"bag": (h * emb[0] + (t - h) * emb[1]) / max(t, 1),
                   "belief": np.array([p, t / turns]) @ proj,
                   "output": np.array([belief]) @ out_proj,
                   "noise": np.zeros(D)}
            for r in new:
                rows.append(r)
                feats.append([per[kind] + noise * noise_rng.normal(size=D) for kind in layers])
    ds = cache_dataset(rows, attrs)
    return ds.assign(resid=(("query", "layer", "d_model"), np.asarray(feats)))


def counts(ds: xr.Dataset, turns: int = 6) -> dict[str, F64]:
    """Statistic features of each read-out: ``counts`` (h, n) and ``turn`` (one-hot)."""
    ep = np.asarray(ds["episode"].values)
    turn = np.asarray(ds["turn"].values)
    flips = _flips(int(ep.max()) + 1, turns, int(ds.attrs.get("flips_seed", 0)))
    h = np.array([flips[e, :t].sum() for e, t in zip(ep, turn, strict=True)], dtype=float)
    return {"counts": np.stack([h, turn.astype(float)], axis=1),
            "turn": np.eye(turns + 1)[turn]}


def study_attrs(net: int, *, init: str = "random", **extra: object) -> dict[str, object]:
    """Root attributes of a file of one study from network ``net`` (``init`` ``trained`` or
    ``random``): what a floor's control must share with its study."""
    return {"env_name": "coin-flip", "env_params": '{"turns": 6, "sides": "heads-tails"}',
            "seed": 0, "episodes": 24, "model_id": "synthetic", "model_n_layers": 2,
            "model_d_model": D, "weights_hash": f"net{net}", "model_init": init,
            "model_init_seed": net, "flips_seed": 0, **extra}
