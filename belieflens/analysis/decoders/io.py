"""Save and load fitted probes: one ``.npz`` with the weights and the provenance as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from belieflens.analysis.decoders.provenance import ProbeProvenance
from belieflens.analysis.decoders.ridge import RidgeProbe
from belieflens.analysis.decoders.softmax import SoftmaxProbe

Probe = RidgeProbe | SoftmaxProbe


def save_probe(probe: Probe, path: str | Path) -> Path:
    """Write ``probe`` to one ``.npz`` (weights) holding its provenance as a JSON string."""
    p = Path(path)
    if p.suffix != ".npz":
        p = p.with_suffix(p.suffix + ".npz")
    meta: dict[str, Any] = {"provenance": asdict(probe.provenance)}
    if isinstance(probe, RidgeProbe):
        meta["scalar"] = probe.scalar
    np.savez(p, coef=probe.coef, intercept=probe.intercept, meta=np.array(json.dumps(meta)))
    return p


def load_probe(path: str | Path) -> Probe:
    """Read a probe written by :func:`save_probe`."""
    with np.load(Path(path), allow_pickle=False) as z:
        coef = np.asarray(z["coef"], dtype=np.float64)
        intercept = np.asarray(z["intercept"], dtype=np.float64)
        meta = json.loads(str(z["meta"]))
    prov = ProbeProvenance(**meta["provenance"])
    if prov.kind == "ridge":
        return RidgeProbe(coef, intercept, bool(meta["scalar"]), prov)
    if prov.kind == "softmax":
        return SoftmaxProbe(coef, intercept, prov)
    raise ValueError(f"unknown probe kind {prov.kind!r} in {path}")
