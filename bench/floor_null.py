"""How often a floor comparison flags a layer where nothing differs, and how large a difference
it finds: the interval and correction of ``analyze --floor``
(:func:`belieflens.analysis.floor_test.beyond_floor`) beside three ways that leave noise out.

Simulated read-outs, one value per episode and layer for each network: a seed effect per
network and layer, an effect per episode shared by every network (the files share their
episodes), and noise per network and episode, each correlated across layers (AR(1),
``--rho``). Under the null the study is one more untrained network; with ``--effect`` the
study's value is raised by that many seed standard deviations at a third of the layers. Each
way of drawing the interval flags the layers whose interval's low end is above 0:

- ``episodes per layer``: the percentile bootstrap over episodes, layer by layer (the old
  interval: no seeds' spread, no correction);
- ``episodes max-T``: the same corrected across layers by max-T;
- ``seeds resampled max-T``: a hierarchical bootstrap that also resamples the control seeds
  (the floor mean's uncertainty) and corrects by max-T;
- ``one more seed max-T``: ``beyond_floor``: episodes plus one more seed's deviation
  (Student's t from the controls' spread), max-T (what ``analyze --floor`` reports).

Prints per way the family-wise rate (share of null studies with any layer flagged), the mean
layers flagged, and with ``--effect`` the share of the raised layers found; the last line
the shipped way's family-wise rate beside the old interval's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from belieflens.analysis.floor_test import (
    LEVEL,
    TOLERANCE,
    Beyond,
    beyond_floor,
    max_t,
)

F64 = NDArray[np.float64]

Way = Callable[[F64, F64, F64, F64, np.random.Generator], NDArray[np.bool_]]


def _per_layer(t: F64, tb: F64, c: F64, cb: F64, rng: np.random.Generator) -> NDArray[np.bool_]:
    boot = tb - cb.mean(axis=0)
    return np.asarray(np.percentile(boot, 100 * (1 - LEVEL) / 2, axis=0) > TOLERANCE)


def _episodes_max_t(t: F64, tb: F64, c: F64, cb: F64,
                    rng: np.random.Generator) -> NDArray[np.bool_]:
    sel = t - c.mean(axis=0)
    dev = tb - cb.mean(axis=0) - sel
    return max_t(sel, dev, dev.std(axis=0)).exceeds


def _seeds_resampled(t: F64, tb: F64, c: F64, cb: F64,
                     rng: np.random.Generator) -> NDArray[np.bool_]:
    sel = t - c.mean(axis=0)
    pick = rng.integers(0, c.shape[0], size=(tb.shape[0], c.shape[0]))
    floor = np.stack([cb[pick[b], b].mean(axis=0) for b in range(tb.shape[0])])
    dev = tb - floor - sel
    return max_t(sel, dev, dev.std(axis=0)).exceeds


def _one_more_seed(t: F64, tb: F64, c: F64, cb: F64,
                   rng: np.random.Generator) -> NDArray[np.bool_]:
    out: Beyond = beyond_floor(t, tb, c, cb, rng, sign=1.0)
    return out.exceeds


WAYS: dict[str, Way] = {"episodes per layer": _per_layer, "episodes max-T": _episodes_max_t,
                        "seeds resampled max-T": _seeds_resampled,
                        "one more seed max-T": _one_more_seed}


def simulate(rng: np.random.Generator, *, controls: int, layers: int, episodes: int,
             rho: float, effect: float, n_boot: int) -> tuple[F64, F64, F64, F64, F64]:
    """One study: ``(trained, trained_boot, controls, controls_boot, raised)`` (the last: 1
    at the layers the effect raises)."""
    lag = np.abs(np.subtract.outer(np.arange(layers), np.arange(layers)))
    chol = np.linalg.cholesky(rho ** lag + 1e-9 * np.eye(layers))
    seeds = rng.standard_normal((controls + 1, layers)) @ chol.T
    raised = np.zeros(layers)
    raised[layers // 3: 2 * layers // 3] = 1.0
    seeds[0] += effect * raised
    shared = rng.standard_normal((episodes, layers)) @ chol.T
    own = 0.5 * rng.standard_normal((controls + 1, episodes, layers)) @ chol.T
    values = seeds[:, None, :] + shared[None] + own
    w = rng.multinomial(episodes, np.full(episodes, 1 / episodes), size=n_boot) / episodes
    full, boot = values.mean(axis=1), np.einsum("be,fel->fbl", w, values)
    return full[0], boot[0], full[1:], boot[1:], raised


def main() -> None:
    """Run the simulation and print the rates (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", type=int, default=200, help="simulated studies per way")
    ap.add_argument("--controls", type=int, default=3, help="untrained seeds of the floor")
    ap.add_argument("--layers", type=int, default=31)
    ap.add_argument("--episodes", type=int, default=24)
    ap.add_argument("--rho", type=float, default=0.5, help="correlation of adjacent layers")
    ap.add_argument("--effect", type=float, default=0.0,
                    help="the study's raise at a third of the layers, in seed SDs (0: null)")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    flags: dict[str, list[int]] = {name: [] for name in WAYS}
    found: dict[str, list[float]] = {name: [] for name in WAYS}
    for _ in range(a.studies):
        t, tb, c, cb, raised = simulate(rng, controls=a.controls, layers=a.layers,
                                        episodes=a.episodes, rho=a.rho, effect=a.effect,
                                        n_boot=a.bootstrap)
        for name, way in WAYS.items():
            hit = way(t, tb, c, cb, rng)
            flags[name].append(int(hit[raised == 0].sum()))
            found[name].append(float(hit[raised == 1].mean()) if a.effect else np.nan)
    print(f"{a.studies} studies, {a.controls} controls, {a.layers} layers, {a.episodes} "
          f"episodes, rho {a.rho}, effect {a.effect:g} seed SDs")
    for name in WAYS:
        f = np.array(flags[name])
        line = (f"{name:>22}: family-wise rate {np.mean(f > 0):.3f}, layers flagged where "
                f"none differs {f.mean():.2f}")
        if a.effect:
            line += f", raised layers found {np.mean(found[name]):.3f}"
        print(line)
    old = np.mean(np.array(flags["episodes per layer"]) > 0)
    new = np.mean(np.array(flags["one more seed max-T"]) > 0)
    print(f"family_wise_rate={new:.3f} old_interval={old:.3f} allowed={1 - LEVEL:.2f}")


if __name__ == "__main__":
    main()
