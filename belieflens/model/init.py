"""Untrained controls of a model: the same architecture without what training put in it.

An internal read-out (a lens per layer, a linear decoder, the belief geometry) means something
only against what a network of the same shape gives untrained. ``--init`` makes that network
from any model ``--model`` names, and it then runs through the identical pipeline:

- ``random:SEED``: the architecture's own initialisation (transformers builds the model class
  from the loaded model's configuration; its ``post_init`` runs the class's
  ``_init_weights``), under ``torch.manual_seed(SEED)`` in a forked random state, in
  float32 (then cast to the requested dtype, so a seed gives the same weights in any
  dtype up to rounding). The same seed gives the same weights bit for bit; the trained
  weights are only read for the configuration and the tokenizer.
- ``shuffled:SEED``: every trained weight tensor's entries permuted (one seeded permutation
  per tensor, drawn in parameter order): each tensor keeps its values, so its distribution
  and norm, but loses their arrangement. The harder floor for a trained model's scale.
- ``trained``: the model as it is (the default).

The control's ``weights_hash`` is the SHA-256 of its tensors, so a control is a different
study from its base model and from another seed's control; provenance records the base
model's hash beside ``init`` and ``init_seed``.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any, Literal, get_args

from belieflens.errors import ParameterError

InitKind = Literal["trained", "random", "shuffled"]
"""How a model's weights are set: as trained, freshly initialised, or permuted per tensor."""

INIT_KINDS: tuple[InitKind, ...] = get_args(InitKind)

INIT_LABELS: dict[InitKind, str] = {"trained": "trained", "random": "untrained",
                                    "shuffled": "shuffled"}
"""How reports name a model of each kind (``compare`` labels a random one "untrained")."""


@dataclass(frozen=True)
class Init:
    """A model's weights: ``kind`` and, for a control, its ``seed``.

    Examples:
        >>> Init.parse("random:3")
        Init(kind='random', seed=3)
        >>> str(Init.parse("shuffled:0")), str(Init())
        ('shuffled:0', 'trained')
    """

    kind: InitKind = "trained"
    seed: int = 0

    @classmethod
    def parse(cls, text: str | Init | None) -> Init:
        """``trained``, ``random:SEED`` or ``shuffled:SEED`` (``None``: trained); anything
        else is one line (:class:`ParameterError`) naming the option."""
        if text is None:
            return cls()
        if isinstance(text, Init):
            return text
        raw = str(text).strip()
        kind, sep, seed_text = raw.partition(":")
        allowed = "trained, random:SEED or shuffled:SEED (SEED an integer >= 0)"
        if kind == "trained" and not sep:
            return cls()
        if kind not in ("random", "shuffled"):
            raise ParameterError(f"option '--init' = {raw!r} is not allowed: unknown kind "
                                 f"{kind!r}; {allowed}")
        try:
            seed = int(seed_text, 10)
        except ValueError:
            raise ParameterError(f"option '--init' = {raw!r} is not allowed: the seed "
                                 f"{seed_text!r} is not an integer; {allowed}") from None
        if seed < 0 or seed >= 2**63:
            raise ParameterError(f"option '--init' = {raw!r} is not allowed: the seed must "
                                 f"be in 0..2**63-1; {allowed}")
        return cls("random" if kind == "random" else "shuffled", seed)

    @property
    def trained(self) -> bool:
        """Whether the weights are the model's own."""
        return self.kind == "trained"

    @property
    def label(self) -> str:
        """``untrained seed 3``, ``shuffled seed 0`` or ``trained``."""
        if self.trained:
            return "trained"
        return f"{INIT_LABELS[self.kind]} seed {self.seed}"

    def __str__(self) -> str:
        return "trained" if self.trained else f"{self.kind}:{self.seed}"


TRAINED = Init()
"""A model's own weights (the default)."""


def initialise(model: Any, init: Init) -> Any:
    """``model`` (a transformers causal LM) as ``init`` says: the model itself when trained,
    a fresh model of its class and configuration (``random``), or the model with every
    parameter tensor's entries permuted in place (``shuffled``)."""
    if init.kind == "random":
        return _fresh(model, init.seed)
    if init.kind == "shuffled":
        _shuffle(model, init.seed)
    return model


def _fresh(model: Any, seed: int) -> Any:
    """A new instance of ``model``'s class from its configuration, initialised by the class
    from ``seed`` in float32 and cast to the model's dtype."""
    import torch

    config = copy.deepcopy(model.config)
    if getattr(config, "quantization_config", None) is not None:
        del config.quantization_config  # a GGUF's flag; the weights built here are plain
    dtype = next(model.parameters()).dtype
    config.dtype = torch.float32
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = type(model)(config)
    return fresh.to(dtype).eval()


def _shuffle(model: Any, seed: int) -> None:
    """Permute each parameter tensor's entries (tied tensors once), seeded, in place."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():  # shared (tied) parameters come once
            flat = p.data.reshape(-1)
            perm = torch.randperm(flat.numel(), generator=gen)
            p.data.copy_(flat[perm].reshape(p.shape))


def weights_digest(model: Any) -> str:
    """SHA-256 of a model's tensors: each state-dict entry's name, dtype, shape and bytes in
    order (a tied tensor hashed under each of its names)."""
    import torch

    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().data)
    return h.hexdigest()
