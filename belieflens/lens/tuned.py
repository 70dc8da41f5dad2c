"""A trained tuned lens: translators, their provenance, saving, loading and model checks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from jaxtyping import Float

from belieflens.errors import BeliefLensError

FORMAT = "belieflens-tuned-lens"
VERSION = 1
CONFIG = "config.json"
WEIGHTS = "translators.npz"


class TunedLensError(BeliefLensError):
    """A tuned lens folder is unreadable, or does not belong to the model or file it is used on."""


@dataclass(frozen=True)
class TunedLensConfig:
    """Provenance of a tuned lens (written as ``config.json``).

    Attributes:
        model_id: the model's official id.
        revision: the model revision (``unknown`` for GGUF-loaded weights).
        weights_hash: the model's weights hash, as in a cache file's ``weights_hash`` attribute.
        unembed_hash: SHA-256 of the unembedding matrix bytes (float32, C order).
        n_layers: resid layers (embeddings + every block output), as a cache file's ``layer``.
        d_model: residual width.
        vocab_size: rows of the unembedding.
        train: the training options and data description.
        metrics: held-out mean KL(final ‖ lens) per layer for the logit and the tuned lens.
        belieflens_version: package version that trained it.
    """

    model_id: str
    revision: str
    weights_hash: str
    unembed_hash: str
    n_layers: int
    d_model: int
    vocab_size: int
    train: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    belieflens_version: str = "unknown"


@dataclass(frozen=True, eq=False)
class TunedLens:
    """Per-layer affine translators ``h -> h + h @ weight[l].T + bias[l]``.

    ``weight [layer, d_model, d_model]`` (out, in) and ``bias [layer, d_model]``
    cover every resid layer of a cache file; the last layer's are zero (identity).
    A :class:`~belieflens.lens.Lens` (``name = "tuned-lens"``). Training needs a
    model and lives in :mod:`belieflens.lens`.
    """

    config: TunedLensConfig
    weight: Float[np.ndarray, "layer d_out d_in"]
    bias: Float[np.ndarray, "layer d_model"]

    @property
    def name(self) -> str:
        """``tuned-lens`` (the :class:`~belieflens.lens.Lens` protocol)."""
        return "tuned-lens"

    def transform(self, resid: Any) -> Any:
        """Translate residuals ``[..., layer, d_model]`` of every layer.

        A numpy array is computed in float64; a torch tensor in its own dtype and device.
        """
        torch_in = type(resid).__module__.split(".")[0] == "torch"
        shape = tuple(resid.shape) if torch_in else np.shape(resid)
        if shape[-2:] != self.bias.shape:
            raise TunedLensError(
                f"residuals of shape [..., {shape[-2]}, {shape[-1]}] do not fit this lens: "
                f"it has {self.bias.shape[0]} layers of width {self.bias.shape[1]}"
            )
        if torch_in:
            import torch

            t: Any = resid
            tw = torch.as_tensor(self.weight, dtype=t.dtype, device=t.device)
            tb = torch.as_tensor(self.bias, dtype=t.dtype, device=t.device)
            return t + torch.einsum("...li,loi->...lo", t, tw) + tb
        h = np.asarray(resid, dtype=np.float64)
        w = self.weight.astype(np.float64)
        moved = np.einsum("...li,loi->...lo", h, w)
        return np.asarray(h + moved + self.bias.astype(np.float64))

    def __call__(self, resid: Any) -> Any:
        """:meth:`transform` (kept so a lens is also a plain translator callable)."""
        return self.transform(resid)

    def check_model(self, model: Any) -> None:
        """Raise :class:`TunedLensError` unless ``model`` (a LoadedModel) is the lens's model."""
        from belieflens.lens.head import unembed_hash

        got = unembed_hash(model)
        if got != self.config.unembed_hash:
            raise TunedLensError(
                f"tuned lens of {self.config.model_id} does not fit model "
                f"{model.info.official_id}: unembedding hash {got[:12]}… != "
                f"{self.config.unembed_hash[:12]}… (train a lens for this model)"
            )
        self._check_shape(model.info.n_layers + 1, model.info.d_model, "model")

    def check_file(self, ds: xr.Dataset) -> None:
        """Raise :class:`TunedLensError` unless cache file ``ds`` comes from the lens's model."""
        found = str(ds.attrs.get("weights_hash", ""))
        if found != self.config.weights_hash:
            raise TunedLensError(
                f"tuned lens of {self.config.model_id} (weights {self.config.weights_hash[:12]}…)"
                f" does not fit this cache file: its model {ds.attrs.get('model_id')!r} has "
                f"weights_hash {found[:12] or '(none)'}…"
            )
        self._check_shape(ds.sizes["layer"], ds.sizes["d_model"], "cache file")

    def _check_shape(self, layers: int, d_model: int, what: str) -> None:
        if (layers, d_model) != (self.config.n_layers, self.config.d_model):
            raise TunedLensError(
                f"tuned lens has {self.config.n_layers} layers x {self.config.d_model}; "
                f"the {what} has {layers} x {d_model}"
            )


def identity_lens(config: TunedLensConfig) -> TunedLens:
    """A lens whose translators are all zero: it equals the logit lens."""
    n, d = config.n_layers, config.d_model
    return TunedLens(config, np.zeros((n, d, d), np.float32), np.zeros((n, d), np.float32))


def save_tuned_lens(lens: TunedLens, folder: str | Path) -> Path:
    """Write ``config.json`` and ``translators.npz`` into ``folder`` (created); return it."""
    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise TunedLensError(f"--out {out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / WEIGHTS, weight=lens.weight.astype(np.float32),
             bias=lens.bias.astype(np.float32))
    body = {"format": FORMAT, "version": VERSION, **asdict(lens.config)}
    (out / CONFIG).write_text(json.dumps(body, indent=2, default=str) + "\n")
    return out


def load_tuned_lens(folder: str | Path, *, model: Any | None = None) -> TunedLens:
    """Load a lens saved by :func:`save_tuned_lens`; with ``model``, check it belongs to it."""
    src = Path(folder)
    cfg_path, w_path = src / CONFIG, src / WEIGHTS
    if not cfg_path.is_file() or not w_path.is_file():
        raise TunedLensError(
            f"tuned lens folder {src} lacks {CONFIG} or {WEIGHTS}: train one with "
            "`belieflens lens train --model M --out DIR`"
        )
    try:
        body = json.loads(cfg_path.read_text())
        arrays = np.load(w_path)
        weight, bias = np.asarray(arrays["weight"]), np.asarray(arrays["bias"])
    except (OSError, ValueError, KeyError) as e:
        raise TunedLensError(f"tuned lens {src} is unreadable: {str(e).splitlines()[0]}") from None
    if body.get("format") != FORMAT or body.get("version") != VERSION:
        raise TunedLensError(
            f"{cfg_path} is not a {FORMAT} version {VERSION} config "
            f"(format {body.get('format')!r}, version {body.get('version')!r})"
        )
    names = set(TunedLensConfig.__dataclass_fields__)
    config = TunedLensConfig(**{k: v for k, v in body.items() if k in names})
    n, d = config.n_layers, config.d_model
    if weight.shape != (n, d, d) or bias.shape != (n, d):
        raise TunedLensError(
            f"{w_path}: translators of shape {weight.shape}, {bias.shape} do not match the "
            f"config's {n} layers x {d}"
        )
    lens = TunedLens(config, weight, bias)
    if model is not None:
        lens.check_model(model)
    return lens


def parse_lens_spec(spec: str) -> Path:
    """The folder of a ``--lens tuned:DIR`` value; anything else is a :class:`TunedLensError`."""
    kind, sep, rest = spec.partition(":")
    if kind != "tuned" or not sep or not rest:
        raise TunedLensError(
            f"option '--lens' = {spec!r} is not allowed: tuned:DIR (a folder written by "
            "`belieflens lens train`)"
        )
    return Path(rest)
