"""Untrained controls (``--init``) on real models: for each model, a small study extracted
from the trained model, from ``random:0`` twice, from ``random:1`` and from ``shuffled:0``,
then from the trained model again (six extractions).

It prints, per model, whether the two ``random:0`` files are equal bit for bit (every
variable), whether ``random:1`` and ``shuffled:0`` give other residuals than ``random:0`` and
the trained model, whether the trained model's file after the controls equals the one before
(the controls leave the trained weights, and the weight cache, as they were), and the load
time of each control beside the trained model's (the same process, the same study).

Run: ``.venv/bin/python -m bench.init_gate [smollm2-135m coin-toy ...] [--out DIR]``;
a language model runs ``coin-flip --set turns=1`` (1 episode), a toy its token process
(2 episodes).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import belieflens
from belieflens.api import ExtractEvent, ModelLoaded
from belieflens.model.load import TOY_MODELS
from bench.faults import same_data

TOY_ENVS = {"coin-toy": "coin-tokens", "mess3-toy": "mess3", "rrxor-toy": "rrxor"}
"""Each toy's process."""


def resid(path: Path) -> np.ndarray:
    """The residuals of every layer but the embeddings (which a permutation of a layer's
    weights leaves as they are in a random network too)."""
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return np.asarray(ds["resid"].values[:, 1:])


@dataclass(frozen=True)
class Gate:
    """What the extractions of one model show."""

    model: str
    same_seed_equal: bool
    seeds_differ: bool
    shuffled_differs: bool
    control_differs_from_trained: bool
    trained_unchanged: bool
    loads: dict[str, float]
    seconds: float

    def line(self) -> str:
        """The model's line of output."""
        loads = ", ".join(f"{k} {v:.1f}s" for k, v in self.loads.items())
        return (f"{self.model}: random:0 twice equal {self.same_seed_equal}; random:1 differs "
                f"{self.seeds_differ}; shuffled:0 differs {self.shuffled_differs}; control "
                f"differs from trained {self.control_differs_from_trained}; trained file "
                f"unchanged {self.trained_unchanged}; loads {loads}; {self.seconds:.0f} s")


def run(model: str, folder: Path) -> Gate:
    """The six extractions of ``model`` and what they show."""
    env = TOY_ENVS.get(model, "coin-flip")
    params = {} if model in TOY_MODELS else {"turns": 1}
    episodes = 2 if model in TOY_MODELS else 1
    loads: dict[str, float] = {}

    def extract(name: str, init: str | None) -> Path:
        def on(event: ExtractEvent) -> None:
            if isinstance(event, ModelLoaded) and event.role == "model":
                loads[name] = event.info.load_seconds

        return belieflens.extract(env, params=params, model=model, out=folder / f"{name}.h5",
                                  episodes=episodes, seed=0, init=init, threads=1,
                                  on_event=on, overwrite=True)

    t0 = time.perf_counter()
    first = extract("trained", None)
    a, b = extract("random0", "random:0"), extract("random0-again", "random:0")
    c, s = extract("random1", "random:1"), extract("shuffled0", "shuffled:0")
    again = extract("trained-again", None)
    return Gate(model, same_data(a, b), not np.array_equal(resid(a), resid(c)),
                not np.array_equal(resid(s), resid(first)),
                not np.array_equal(resid(a), resid(first)), same_data(first, again), loads,
                time.perf_counter() - t0)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the check for each model named."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=["smollm2-135m", *TOY_MODELS])
    ap.add_argument("--out", type=Path, default=None, help="keep the files here")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.out or Path(tmp)
        for model in args.models:
            folder = base / model
            folder.mkdir(parents=True, exist_ok=True)
            print(run(model, folder).line(), flush=True)


if __name__ == "__main__":
    main()
