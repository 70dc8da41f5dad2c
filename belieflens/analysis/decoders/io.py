"""Save and load fitted decoders: one ``.npz`` with the weights and the provenance as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from belieflens.analysis.decoders.provenance import DecoderProvenance
from belieflens.analysis.decoders.ridge import RidgeDecoder
from belieflens.analysis.decoders.softmax import SoftmaxDecoder

Decoder = RidgeDecoder | SoftmaxDecoder


def save_decoder(decoder: Decoder, path: str | Path) -> Path:
    """Write ``decoder`` to one ``.npz`` (weights) holding its provenance as a JSON string."""
    p = Path(path)
    if p.suffix != ".npz":
        p = p.with_suffix(p.suffix + ".npz")
    meta: dict[str, Any] = {"provenance": asdict(decoder.provenance)}
    if isinstance(decoder, RidgeDecoder):
        meta["scalar"] = decoder.scalar
    np.savez(p, coef=decoder.coef, intercept=decoder.intercept, meta=np.array(json.dumps(meta)))
    return p


def load_decoder(path: str | Path) -> Decoder:
    """Read a decoder written by :func:`save_decoder`."""
    with np.load(Path(path), allow_pickle=False) as z:
        coef = np.asarray(z["coef"], dtype=np.float64)
        intercept = np.asarray(z["intercept"], dtype=np.float64)
        meta = json.loads(str(z["meta"]))
    prov = DecoderProvenance(**meta["provenance"])
    if prov.kind == "ridge":
        return RidgeDecoder(coef, intercept, bool(meta["scalar"]), prov)
    if prov.kind == "softmax":
        return SoftmaxDecoder(coef, intercept, prov)
    raise ValueError(f"unknown decoder kind {prov.kind!r} in {path}")
