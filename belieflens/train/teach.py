"""Bayesian teaching: LoRA fine-tuning toward the oracle at every read-out ``extract`` renders.

:func:`teach` fine-tunes a model with LoRA adapters (the ``peft`` package) so that its
distribution over the option tokens at each read-out of an environment's training episodes
(each belief question, each Latin-square rotation, each delivery) matches a target: the
oracle, or with ``temper`` S the posterior with the evidence weighted by S
(:class:`~belieflens.episodes.capabilities.Temperable`). The loss is KL(target ‖ model) at
the answer position extraction reads, with the model's option distribution renormalised over
the options as the debiased belief is; a multi-token option's log-probability sums over its
tokens, as extraction's does.

Cost. Only the residual stream above the lowest adapted layer depends on the adapters, so
each training tree (:mod:`belieflens.train.teach_data`: one ``(episode, delivery, turn)``'s
read-outs, every shared token once, under an ancestor mask) runs the frozen layers below it
once, without gradients, and keeps their output (the *trunk*); every step then runs only the
adapted layers forward and backward, and the unembedding at the read positions only.

Determinism. The adapters' initial weights derive from ``seed``; step ``k``'s trees from
``(seed, k)``; a checkpoint (adapters, optimiser, step) is written atomically at least every
``checkpoint_seconds`` of training and when SIGINT or SIGTERM stops the run, so a rerun of
the same command resumes and ends with the adapters of an uninterrupted run, bit for bit on
the same machine and thread count.

The result is an adapter folder (``adapter_config.json``, ``adapter_model.safetensors``) with
``teach.json``: the base model's spec and weights hash, the environment and its parameters,
every teach option, the training episodes' seed, the loss curve and the CPU time and peak
memory of training. Such a folder is a model: ``--model DIR`` loads the base with the
adapter merged (:mod:`belieflens.model.load`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import resource
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from belieflens.envs import get as get_env
from belieflens.episodes.base import Environment
from belieflens.episodes.capabilities import Temperable
from belieflens.errors import InterruptedRunError, ParameterError
from belieflens.model.load import ADAPTER_INFO, load_transformers
from belieflens.model.unembed import final_logits
from belieflens.run import signals
from belieflens.store.provenance import dist_version, git_commit
from belieflens.train.teach_data import Tree, predecessors, taught, taught_records
from belieflens.train.toy import atomic_torch_save, torch_threads

if TYPE_CHECKING:
    import torch

CHECKPOINT = "checkpoint.pt"
"""The resumable state inside the output folder while training runs."""

PROMPTS = "prompts.txt"
"""The keys of every read-out an adapter was taught on (one per line, sorted; ``teach.json``'s
``prompts``): an evaluation leaves those read-outs out
(:func:`~belieflens.readouts.render.prompt_key`)."""

TRAIN_SEED_OFFSET = 1_000_000_000
"""Training episodes are those of seed ``TRAIN_SEED_OFFSET + seed``: no evaluation seed below
it ever meets them (an adapter's extraction at a training seed is refused)."""

Weigh = Literal["readout", "question"]
"""How teach weighs read-outs in its loss (:attr:`TeachConfig.weigh`)."""

WEIGHS: tuple[Weigh, ...] = get_args(Weigh)

LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                 "up_proj", "down_proj")
"""The linear maps adapted in each chosen layer (a Llama-family block's attention and MLP)."""


@dataclass(frozen=True)
class TeachConfig:
    """Everything that determines a taught adapter's weights.

    Attributes:
        env: the environment's name; ``env_params`` its parameters (``(name, value)`` pairs;
            a mapping is accepted).
        model: the base model's spec (an embedded name, a folder, ...).
        episodes: training episodes (seed ``TRAIN_SEED_OFFSET + seed``).
        seed: the training episodes, the adapters' initial weights and the order of the
            trees derive from it.
        steps: optimiser steps; ``batch``: trees per step.
        rank, alpha: LoRA's rank and scale (``alpha / rank`` multiplies the update).
        layers: the adapted blocks (0-based); empty: the last quarter of the model's blocks.
        lr, warmup: Adam's rate, reached linearly over ``warmup`` steps, then cosine decay to
            a tenth of it.
        schedule: the steps the cosine decay spans (0: ``steps``); a larger one stops the run
            early, at ``steps`` of a ``schedule``-step run.
        temper: the weight of the evidence in the target (1: the oracle).
        weigh: each read-out's weight in the loss: ``readout`` (every read-out 1) or
            ``question`` (each belief question of a tree the same total, however many
            rotations render it; :meth:`~belieflens.train.teach_data.Tree.weights`).
        step_loss: the weight of the step loss beside the KL (0: none): for each read-out
            whose tree has a predecessor (:func:`~belieflens.train.teach_data.predecessors`),
            the squared error of the model's turn-to-turn step in centred option log-probs
            against its target's (:func:`step_error`), the predecessor read without gradient.
        mix: conditions taught together, each a set of parameters over ``env_params``
            (``(name, value)`` pairs; mappings are accepted): ``episodes`` episodes of each,
            condition ``j`` at seed ``train_seed + j`` (:meth:`conditions`). Empty:
            ``env_params`` alone.
    """

    env: str
    env_params: tuple[tuple[str, Any], ...] = ()
    model: str = "smollm2-135m"
    episodes: int = 32
    seed: int = 0
    steps: int = 300
    batch: int = 4
    rank: int = 8
    alpha: float = 16.0
    layers: tuple[int, ...] = ()
    lr: float = 1e-3
    warmup: int = 20
    temper: float = 1.0
    weigh: Weigh = "readout"
    schedule: int = 0
    mix: tuple[tuple[tuple[str, Any], ...], ...] = ()
    step_loss: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "env_params", _pairs(self.env_params))
        object.__setattr__(self, "mix", tuple(_pairs(c) for c in self.mix))
        object.__setattr__(self, "layers", tuple(sorted({int(x) for x in self.layers})))
        for name, lo, hi in (("episodes", 1, 10**6), ("seed", 0, 10**8), ("steps", 1, 10**7),
                             ("batch", 1, 4096), ("rank", 1, 1024), ("warmup", 0, 10**7)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ParameterError(f"option '--{name}' = {v!r} is not allowed: an integer in "
                                     f"{lo}..{hi}")
        if isinstance(self.schedule, bool) or not isinstance(self.schedule, int) or not (
                self.schedule == 0 or self.steps <= self.schedule <= 10**7):
            raise ParameterError(f"option '--schedule' = {self.schedule!r} is not allowed: 0 "
                                 f"or an integer in {self.steps}..{10**7} (at least --steps)")
        _positive("--temper", self.temper)
        if self.weigh not in WEIGHS:
            raise ParameterError(f"option '--weigh' = {self.weigh!r} is not allowed: one of "
                                 f"{', '.join(WEIGHS)}")
        _positive("--lr", self.lr)
        _positive("--alpha", self.alpha)
        if self.step_loss != 0:
            _positive("--step-loss", self.step_loss)

    def as_dict(self) -> dict[str, Any]:
        """The configuration as JSON-ready values (``env_params`` as a dict)."""
        d = dataclasses.asdict(self)
        d["env_params"] = dict(self.env_params)
        d["layers"] = list(self.layers)
        d["mix"] = [dict(c) for c in self.mix]
        return d

    def fingerprint(self) -> str:
        """SHA-256 of the configuration: a checkpoint resumes only under the same one."""
        d = self.as_dict()
        for name in ("schedule", "mix", "step_loss"):  # defaults left out: runs keep theirs
            if not d[name]:
                del d[name]
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()

    @property
    def train_seed(self) -> int:
        """The seed of the training episodes (of the first condition)."""
        return TRAIN_SEED_OFFSET + self.seed

    def conditions(self) -> list[Condition]:
        """What is taught: each condition's parameters, seed and episodes."""
        mix = self.mix or ((),)
        return [Condition({**dict(self.env_params), **dict(c)}, self.train_seed + j,
                          self.episodes) for j, c in enumerate(mix)]


@dataclass(frozen=True)
class Condition:
    """One taught condition: the environment's parameters, the episodes' seed and count."""

    params: dict[str, Any]
    seed: int
    episodes: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``teach.json``'s ``conditions``)."""
        return {"params": dict(self.params), "seed": self.seed, "episodes": self.episodes}


def _pairs(params: Any) -> tuple[tuple[str, Any], ...]:
    """Parameters as sorted ``(name, value)`` pairs (a mapping or pairs)."""
    items = params.items() if isinstance(params, Mapping) else params
    return tuple(sorted((str(k), v) for k, v in items))


def _positive(option: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise ParameterError(f"option '{option}' = {value!r} is not allowed: a number > 0")


def parse_layers(text: str) -> tuple[int, ...]:
    """``--layers`` as block indices: ``22-29``, ``3,5,7`` or a mix (``""``: the default)."""
    out: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",") if p.strip()):
            lo, _, hi = part.partition("-")
            out.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    except ValueError:
        raise ParameterError(f"option '--layers' = {text!r} is not allowed: block indices "
                             "such as 22-29 or 3,5,7") from None
    return tuple(out)


def parse_temper(value: object) -> float:
    """``--temper`` as a number > 0 (text is parsed); else one line."""
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        number = value
    _positive("--temper", number)
    assert isinstance(number, (int, float))
    return float(number)


TAUGHT_LENGTHS: tuple[int, ...] = (4, 7, 10, 13, 16)
"""The episode lengths (flips) the shipped adapters are taught on."""

COIN_FLIP_MIX: tuple[tuple[tuple[str, Any], ...], ...] = tuple(
    (("prior", prior), ("sides", sides), ("summary", summary), ("turns", turns))
    for prior in ("unstated", "stated") for sides in ("heads-tails", "random")
    for summary in ("on", "off") for turns in TAUGHT_LENGTHS)
"""The conditions the shipped adapters are taught on: the prior unstated (flat) or stated
(means 0.2-0.8 worth 2-8 flips), the faces heads/tails or named from word list ``a``, the
single-turn counts printed or not, 4 to 16 flips; both deliveries, the next-flip question
(40 conditions)."""


def prior_drills(n: int, turns: int = 1) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """``n`` conditions that state a prior and flip ``turns`` times (shipped: once), the faces
    heads/tails and named in turn: one read-out in ``turns + 1`` is the stated prior read
    alone, before any flip; the others the first steps from it.

    Examples:
        >>> [dict(c)["sides"] for c in prior_drills(3)]
        ['heads-tails', 'random', 'heads-tails']
        >>> {dict(c)["turns"] for c in prior_drills(2, turns=3)}
        {3}
    """
    return tuple(
        (("prior", "stated"), ("sides", ("heads-tails", "random")[i % 2]), ("summary", "on"),
         ("turns", turns)) for i in range(n))


PRIOR_DRILLS = 120
"""The prior drills (:func:`prior_drills`) of the shipped mix."""

TAUGHT_MIX: tuple[tuple[tuple[str, Any], ...], ...] = COIN_FLIP_MIX + prior_drills(PRIOR_DRILLS)
"""What the shipped S = 1 adapter is taught: :data:`COIN_FLIP_MIX` and 120 prior drills
(:func:`prior_drills`; 160 conditions, 4,080 trees). Without the drills the first adapters
never read a stated prior: before any flip they answered one half whatever the prior stated."""

_MIX_RUN = TeachConfig(
    env="coin-flip", env_params=(("probes", "next-flip"),), mix=TAUGHT_MIX,
    model="smollm2-135m", episodes=3, steps=1320, batch=2, rank=8, alpha=16.0,
    layers=tuple(range(8, 30)), lr=2e-3, warmup=20, temper=1.0)

SHIPPED: dict[str, TeachConfig] = {
    "smollm2-135m-bayes": _MIX_RUN,
    "smollm2-135m-bayes-0.3": dataclasses.replace(_MIX_RUN, mix=COIN_FLIP_MIX, temper=0.3),
    "gemma3-270m-bayes": dataclasses.replace(
        _MIX_RUN, model="gemma3-270m", layers=tuple(range(4, 18)), lr=5e-4, schedule=1320),
}
"""The configurations of the shipped adapters (``belieflens/data/adapters/<name>/``, rebuilt by
``make adapters``): LoRA of rank 8 on every linear map of SmolLM2-135M's blocks 8-29, taught
the next flip on 3 training episodes of each condition of a mix in 1,320 steps of 2 trees,
Adam at 2e-3 with cosine decay. S = 1 (the posterior): the 160 conditions of
:data:`TAUGHT_MIX` (4,080 trees: 2 deliveries x 2-17 turns x 480 episodes; 2,640 of them
taught). S = 0.3 (the evidence weighted by 0.3): the 40 of :data:`COIN_FLIP_MIX` (2,640 trees,
each once), since with the prior drills it was further from its target on validation
episodes. Blocks 8-29 because the base's decoders read the next flip best at layers 7-10.
Rank 8 keeps 22 blocks under 10 MB. Sized by the 2-hour CPU budget (docs/teaching.md has the
validation readings, docs/teaching-recipes.md every recipe tried). ``gemma3-270m-bayes``: the
S = 1 recipe on Gemma-3-270m, LoRA on its blocks 4-17 (the top three quarters) at a quarter of
the rate (at 2e-3 its adapter answered near a constant); its schedule is written out because it
was taught with snapshots along it (docs/teaching-larger.md)."""


def environment(config: TeachConfig, params: Mapping[str, Any] | None = None) -> Environment:
    """The configuration's environment (with ``params``: one condition's), tempered where
    ``temper`` is not 1."""
    env = get_env(config.env, **dict(config.env_params if params is None else params))
    if config.temper == 1.0:
        return env
    if not isinstance(env, Temperable):
        raise ParameterError(f"option '--temper' is not allowed for {config.env!r}: its "
                             "oracles cannot weight the evidence")
    return env.tempered(config.temper)


def chosen_layers(config: TeachConfig, n_layers: int) -> tuple[int, ...]:
    """The adapted blocks: ``config.layers``, or the last quarter; one line if outside the
    model."""
    if not config.layers:
        return tuple(range(n_layers - max(1, n_layers // 4), n_layers))
    bad = [x for x in config.layers if not 0 <= x < n_layers]
    if bad:
        raise ParameterError(f"option '--layers' = {bad[0]} is not allowed: the model has "
                             f"blocks 0..{n_layers - 1}")
    return config.layers


# ---------------------------------------------------------------------------- the model
@dataclass
class Stack:
    """A Llama-family model's parts, run block by block under any mask (the trunk below the
    lowest adapted block, the adapted blocks above it, the unembedding at read positions).
    Gemma 3's blocks too: each block gets the rotary embedding of its layer type, and its
    sliding-window layers the mask narrowed to the window (by position, as the model's own
    sliding mask is by index in an unpacked sequence); the final logits soft-capped where the
    model's configuration says."""

    model: Any
    first: int

    @property
    def inner(self) -> Any:
        """The decoder (embeddings, blocks, final norm, rotary embedding)."""
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else \
            self.model
        return base.model

    def _blocks(self, h: Any, positions: Any, mask: Any, layers: range) -> Any:
        config = self.inner.config
        types = getattr(config, "layer_types", None) or ["full_attention"] * len(
            self.inner.layers)
        if set(types) == {"full_attention"}:  # Llama, Qwen2: one rotary embedding, one mask
            kinds = {"full_attention": (self.inner.rotary_emb(h, positions), mask)}
        else:  # Gemma 3: a rotary embedding per layer type, the sliding layers' window
            kinds = {t: (self.inner.rotary_emb(h, positions, t),
                         window_mask(mask, positions, config.sliding_window)
                         if t == "sliding_attention" else mask) for t in set(types)}
        for i in layers:
            rot, m = kinds[types[i]]
            out = self.inner.layers[i](h, attention_mask=m, position_ids=positions,
                                       position_embeddings=rot)
            h = out[0] if isinstance(out, tuple) else out
        return h

    def trunk(self, ids: Any, positions: Any, mask: Any) -> Any:
        """The residual stream entering block ``first`` ``[1, token, d_model]`` (no grad)."""
        import torch

        with torch.no_grad():
            h = self.inner.embed_tokens(ids)
            return self._blocks(h, positions, mask, range(self.first))

    def top(self, h: Any, positions: Any, mask: Any, reads: Any) -> Any:
        """Full-vocabulary log-probs ``[read, vocab]`` at the read positions."""
        import torch

        h = self._blocks(h, positions, mask, range(self.first, len(self.inner.layers)))
        return torch.log_softmax(final_logits(self.model, self.inner.norm(h[0, reads])), dim=-1)


def window_mask(mask: Any, positions: Any, window: int) -> Any:
    """``mask`` (additive ``[1, 1, token, token]``) with attention further back than
    ``window`` positions forbidden (a sliding-window layer's: key position > query position
    - window)."""
    import torch

    pos = positions[0]
    far = (pos[:, None] - pos[None, :]) >= window
    return mask.masked_fill(far[None, None], torch.finfo(mask.dtype).min)


def additive_mask(allowed: np.ndarray) -> torch.Tensor:
    """``[1, 1, token, token]``: 0 where attention is allowed, the dtype's minimum elsewhere."""
    import torch

    m = torch.from_numpy(allowed)
    out = torch.zeros(m.shape, dtype=torch.float32)
    out.masked_fill_(~m, torch.finfo(torch.float32).min)
    return out[None, None]


def check_stack(model: Any, spec: str) -> None:
    """One line unless running the blocks one by one reproduces the model's logits (a
    Llama-family decoder: embeddings, blocks, final norm, rotary embedding)."""
    import torch

    try:
        stack = Stack(model, 0)
        ids = torch.arange(1, 9)[None]
        pos = torch.arange(8)[None]
        with torch.no_grad():
            want = torch.log_softmax(model(ids).logits[0].float(), -1)
            got = stack.top(stack.trunk(ids, pos, additive_mask(np.tri(8, dtype=bool))), pos,
                            additive_mask(np.tri(8, dtype=bool)), torch.arange(8))
        ok = bool((want - got).abs().max() < 1e-3)
    except (AttributeError, TypeError, IndexError):
        ok = False
    if not ok:
        raise ParameterError(f"option '--model' = {spec!r} is not allowed: teach runs "
                             "Llama-family and Gemma 3 decoders block by block and this "
                             "model's blocks do not reproduce its logits")


def with_lora(model: Any, config: TeachConfig, layers: Sequence[int]) -> Any:
    """``model`` wrapped by peft with LoRA on :data:`LORA_TARGETS` of ``layers`` (initial
    weights from ``config.seed``); every other weight frozen."""
    import torch
    from peft import LoraConfig, get_peft_model

    alpha: Any = config.alpha  # peft annotates an int; the scale alpha / rank is any number
    lora = LoraConfig(r=config.rank, lora_alpha=alpha, lora_dropout=0.0, bias="none",
                      target_modules=list(LORA_TARGETS), layers_to_transform=list(layers),
                      init_lora_weights=True)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)  # peft asks a renamed flag
        torch.manual_seed(config.seed)
        peft_model = get_peft_model(model, lora)
    peft_model.train()
    return peft_model


def option_logprobs(stack: Stack, tree: Tree, trunk: Any) -> Any:
    """``[readout, option]`` the model's log-probabilities over each read-out's options
    (whole continuations; -inf past its options)."""
    import torch

    pos = torch.from_numpy(tree.positions)[None]
    mask = additive_mask(tree.mask())
    lp = stack.top(trunk, pos, mask, torch.from_numpy(tree.reads))
    idx = torch.from_numpy(tree.option_read)
    tok_lp = lp[idx.clamp(min=0), torch.from_numpy(tree.option_token)]
    opt_lp = torch.where(idx >= 0, tok_lp, torch.zeros_like(tok_lp)).sum(-1)
    return torch.log_softmax(opt_lp.masked_fill(~_valid(tree), float("-inf")), dim=-1)


def _valid(tree: Tree) -> Any:
    import torch

    k = torch.arange(tree.target.shape[1])[None]
    return k < torch.from_numpy(tree.n_options)[:, None]


def readout_kl(logq: Any, tree: Tree) -> Any:
    """``[readout]`` KL(target ‖ ``logq``'s distribution) of each of the tree's read-outs."""
    import torch

    t = torch.from_numpy(tree.target).to(logq.dtype)
    logt = torch.log(t.clamp(min=1e-30))
    return torch.where(t > 0, t * (logt - logq), torch.zeros_like(t)).sum(-1)


def step_error(logq: Any, logq_before: Any, tree: Tree, before: Tree) -> Any:
    """``[readout]`` the mean over options of the squared error of the model's step from
    ``before`` (the predecessor tree, its read-outs lined up) to ``tree`` against the
    target's, in log-probabilities centred over each read-out's options (for two options,
    a quarter of the squared error of the step in log-odds); targets below 1e-6 are read as
    1e-6."""
    import torch

    valid = _valid(tree)
    n = torch.from_numpy(tree.n_options).to(logq.dtype)

    def centred(x: Any) -> Any:
        x = torch.where(valid, x, torch.zeros_like(x))
        return torch.where(valid, x - x.sum(-1, keepdim=True) / n[:, None], torch.zeros_like(x))

    def log_target(t: Tree) -> Any:
        return torch.log(torch.from_numpy(t.target).to(logq.dtype).clamp(min=1e-6))

    err = (centred(logq) - centred(logq_before)) - (
        centred(log_target(tree)) - centred(log_target(before)))
    return (err ** 2).sum(-1) / n


# ---------------------------------------------------------------------------- training
def learning_rate(config: TeachConfig, step: int) -> float:
    """The learning rate at (0-based) ``step``: linear warm-up, cosine decay to ``lr / 10``
    over ``schedule`` (or ``steps``) steps."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    span = config.schedule or config.steps
    frac = min((step - config.warmup) / max(span - config.warmup, 1), 1.0)
    lo = config.lr / 10
    return lo + 0.5 * (config.lr - lo) * (1.0 + math.cos(math.pi * frac))


def step_trees(config: TeachConfig, n_trees: int, step: int) -> list[int]:
    """The trees of ``step``: consecutive slices of seeded permutations, one per epoch."""
    out: list[int] = []
    for k in range(step * config.batch, (step + 1) * config.batch):
        epoch, i = divmod(k, n_trees)
        out.append(int(np.random.default_rng([config.seed, 7, epoch]).permutation(n_trees)[i]))
    return out


@dataclass(frozen=True)
class Progress:
    """One report of :func:`teach` to its ``on_step`` callback."""

    step: int
    steps: int
    loss: float
    """Mean KL (nats) per read-out of this step's trees (weighted by ``weigh``)."""
    seconds: float


@dataclass
class _State:
    """What a checkpoint holds besides the weights."""

    step: int = 0
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0


@dataclass(frozen=True)
class TeachResult:
    """What :func:`teach` produced: the adapter folder and its ``teach.json``."""

    path: Path
    info: dict[str, Any]
    resumed_from: int
    model: Any = None
    """The peft-wrapped model as trained in this call (``None`` when the folder was already
    finished): ``model.merge_and_unload()`` is what loading the folder gives."""


class Trainer:
    """One teach run: the model with adapters, its trees, their trunks, the optimiser."""

    def __init__(self, config: TeachConfig, model: Any, layers: Sequence[int],
                 tree_list: Sequence[Tree]) -> None:
        import torch

        self.config = config
        self.layers = tuple(layers)
        self.model = with_lora(model, config, layers)
        self.stack = Stack(self.model, min(layers))
        self.trees = list(tree_list)
        self.before = predecessors(self.trees)
        self.trunks: dict[int, Any] = {}
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optim = torch.optim.Adam(params, lr=config.lr)

    def trunk(self, i: int) -> Any:
        """Tree ``i``'s trunk, computed on first use and kept."""
        import torch

        if i not in self.trunks:
            t = self.trees[i]
            self.trunks[i] = self.stack.trunk(torch.from_numpy(t.ids)[None],
                                              torch.from_numpy(t.positions)[None],
                                              additive_mask(t.mask()))
        return self.trunks[i]

    def step(self, step: int) -> float:
        """One optimiser step on ``step``'s trees; their weighted mean KL per read-out."""
        idx = step_trees(self.config, len(self.trees), step)
        weights = [self.trees[i].weights(self.config.weigh) for i in idx]
        n = float(sum(w.sum() for w in weights))
        for group in self.optim.param_groups:
            group["lr"] = learning_rate(self.config, step)
        self.optim.zero_grad(set_to_none=True)
        total = 0.0
        for i, w in zip(idx, weights, strict=True):
            loss, kl = self.tree_loss(i, w)
            (loss / n).backward()
            total += kl
        self.optim.step()
        return total / n

    def tree_loss(self, i: int, weights: np.ndarray) -> tuple[Any, float]:
        """Tree ``i``'s loss (with gradient): its read-outs' KL times ``weights``, and with a
        step loss each read-out's :func:`step_error` from the tree's predecessor (read without
        gradient) times ``step_loss`` and its weight; and the weighted KL alone."""
        import torch

        tree = self.trees[i]
        logq = option_logprobs(self.stack, tree, self.trunk(i))
        w = torch.from_numpy(weights).to(logq.dtype)
        kl = (w * readout_kl(logq, tree)).sum()
        j = int(self.before[i])
        if not self.config.step_loss or j < 0:
            return kl, float(kl.detach())
        with torch.no_grad():
            before = option_logprobs(self.stack, self.trees[j], self.trunk(j))
        err = step_error(logq, before, tree, self.trees[j])
        return kl + self.config.step_loss * (w * err).sum(), float(kl.detach())

    def adapter_state(self) -> dict[str, Any]:
        """The adapters' weights (by parameter name)."""
        return {k: v.detach().clone() for k, v in self.model.named_parameters()
                if v.requires_grad}

    def load(self, state: Mapping[str, Any]) -> None:
        """Restore adapters and optimiser from a checkpoint."""
        params = dict(self.model.named_parameters())
        import torch

        with torch.no_grad():
            for k, v in state["adapters"].items():
                params[k].copy_(v)
        self.optim.load_state_dict(state["optim"])


def _save_checkpoint(trainer: Trainer, state: _State, path: Path) -> None:
    with contextlib.ExitStack():
        atomic_torch_save({"fingerprint": trainer.config.fingerprint(), "step": state.step,
                            "adapters": trainer.adapter_state(),
                            "optim": trainer.optim.state_dict(), "losses": state.losses,
                            "seconds": state.seconds, "cpu_seconds": state.cpu_seconds}, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def check_out(out: Path, config: TeachConfig) -> tuple[dict[str, Any] | None, bool]:
    """What ``out`` holds for this run: ``(finished teach.json, checkpoint to resume)``; one
    line if it holds anything else (another teach run, an adapter over another base, other
    files)."""
    if out.exists() and not out.is_dir():
        raise ParameterError(f"option '--out' = '{out}' is not allowed: it is a file")
    if not out.is_dir() or not any(out.iterdir()):
        return None, False
    info = _read_json(out / ADAPTER_INFO)
    fp = config.fingerprint()
    if info is not None:
        base = dict(info.get("base", {}))
        if base.get("spec") != config.model:
            raise ParameterError(
                f"option '--out' = '{out}' is not allowed: it holds an adapter over "
                f"{base.get('spec')!r}, not --model {config.model!r}")
        if info.get("fingerprint") != fp:
            raise ParameterError(f"option '--out' = '{out}' is not allowed: it holds another "
                                 "teach run (other options); choose another folder")
        return info, False
    import torch

    ckpt = out / CHECKPOINT
    if ckpt.is_file():
        try:
            held = torch.load(ckpt, weights_only=False)
        except Exception:
            held = None
        if isinstance(held, dict) and held.get("fingerprint") == fp:
            return None, True
        raise ParameterError(f"option '--out' = '{out}' is not allowed: it holds another "
                             "teach run's checkpoint; choose another folder")
    raise ParameterError(f"option '--out' = '{out}' is not allowed: it is not empty and holds "
                         "no teach run")


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def teach_info(trainer: Trainer, state: _State, base: Mapping[str, Any], threads: int,
               resumed_from: int) -> dict[str, Any]:
    """``teach.json``: base model, environment, options, training conditions and seeds, the
    trained prompts' file, curve, provenance."""
    import torch

    c = trainer.config
    every = max(1, c.steps // 50)
    conditions = [dict(x.as_dict(), params=_env_params(environment(c, x.params)))
                  for x in c.conditions()]
    return {
        "kind": "belieflens teach",
        "base": dict(base),
        "env": c.env,
        "env_params": conditions[0]["params"],
        "conditions": conditions,
        "options": c.as_dict(),
        "layers": list(trainer.layers),
        "lora_targets": list(LORA_TARGETS),
        "fingerprint": c.fingerprint(),
        "target": "oracle" if c.temper == 1.0 else
                  f"posterior with the evidence weighted by {c.temper}",
        "training_episodes": {"seed": c.train_seed, "episodes": c.episodes,
                              "rng": "numpy default_rng([seed, episode])"},
        "prompts": {"file": PROMPTS, "key": "the first 32 hex digits of the SHA-256 of "
                    "each trained read-out's rendered context text (a cache file's prompt)"},
        "training": {
            "steps": c.steps, "trees": len(trainer.trees),
            "readouts": sum(t.readouts for t in trainer.trees),
            "tokens": sum(t.tokens for t in trainer.trees),
            "seconds": round(state.seconds, 1), "cpu_seconds": round(state.cpu_seconds, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "threads": threads or torch.get_num_threads(), "resumed_from": resumed_from,
            "final_loss": round(float(np.mean(state.losses[-every:])), 6),
            "loss_every": every,
            "loss_curve": [round(float(np.mean(state.losses[i:i + every])), 5)
                           for i in range(0, len(state.losses), every)],
        },
        "provenance": {
            "belieflens_git_commit": git_commit(),
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "torch": dist_version("torch"), "transformers": dist_version("transformers"),
            "peft": dist_version("peft"),
        },
    }


def _save(trainer: Trainer, out: Path, info: dict[str, Any], keys: set[str]) -> None:
    """Write the adapter (peft's files), the trained prompts' keys and ``teach.json`` (last: it
    marks the folder done)."""
    trainer.model.save_pretrained(out, safe_serialization=True)
    (out / "README.md").unlink(missing_ok=True)  # peft's model card template: nothing in it
    _write_atomic(out / PROMPTS, "".join(f"{k}\n" for k in sorted(keys)))
    info["prompts"]["count"] = len(keys)
    _write_atomic(out / ADAPTER_INFO, json.dumps(info, indent=1) + "\n")
    for name in (ADAPTER_INFO, PROMPTS, "adapter_model.safetensors", "adapter_config.json"):
        (out / name).chmod(0o644)  # readable as any installed package file


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _run_steps(trainer: Trainer, state: _State, ckpt: Path, *, checkpoint_seconds: float,
               on_step: Callable[[Progress], None] | None, stop_after: int | None) -> None:
    """Steps from ``state.step`` to the end; a checkpoint by time; SIGINT/SIGTERM finish the
    step, save a checkpoint and raise :class:`InterruptedRunError` (a second signal
    abandons the step: the last checkpoint stands)."""
    c = trainer.config
    done = 0
    last_save = time.monotonic()
    with signals.handled() as stop, stop.now("finish"):
        while state.step < c.steps and (stop_after is None or done < stop_after):
            t0, c0 = time.perf_counter(), time.process_time()
            loss = trainer.step(state.step)
            state.step += 1
            done += 1
            state.losses.append(loss)
            state.seconds += time.perf_counter() - t0
            state.cpu_seconds += time.process_time() - c0
            if on_step is not None:
                on_step(Progress(state.step, c.steps, loss, state.seconds))
            due = time.monotonic() - last_save >= checkpoint_seconds
            if stop.requested or (due and state.step < c.steps):
                with stop.now("defer"):
                    _save_checkpoint(trainer, state, ckpt)
                last_save = time.monotonic()
            if stop.requested:
                signum = stop.signum or 15
                raise InterruptedRunError(
                    f"stopped by {signals.name(signum)} after step {state.step} of {c.steps}; "
                    f"checkpoint saved in {ckpt}; rerun the same command to resume", signum)
        if state.step < c.steps:
            with stop.now("defer"):
                _save_checkpoint(trainer, state, ckpt)


def prepare(config: TeachConfig, out: Path) -> tuple[dict[str, Any] | None, bool]:
    """Every check that needs no model: the out folder, the environment's oracles (one
    episode), the temper."""
    finished, resume = check_out(out, config)
    for c in config.conditions():
        taught_records(environment(config, c.params), 1, c.seed)
    return finished, resume


def teach(
    config: TeachConfig,
    out: str | os.PathLike[str],
    *,
    threads: int = 0,
    checkpoint_seconds: float = 300.0,
    on_step: Callable[[Progress], None] | None = None,
    stop_after: int | None = None,
    snapshots: str | os.PathLike[str] | None = None,
    snapshot_every: int = 25,
) -> TeachResult:
    """Teach ``config`` into the adapter folder ``out`` (created; resumed from its checkpoint).

    Bad input (an environment without option-level oracles, ``temper`` <= 0, ``layers``
    outside the model, an ``out`` folder holding another teach run or an adapter over another
    base) is one line (:class:`ParameterError`) before anything is written. A folder holding
    this configuration's finished adapter is returned as is. ``threads``: torch CPU threads
    (0: keep). ``stop_after``: stop with a checkpoint after that many steps of this call (as
    a kill would; for tests). ``snapshots``: a folder (outside ``out``) that receives the
    adapters' weights every ``snapshot_every`` steps (``step-NNNNN.safetensors``), for a
    learning curve measured afterwards.
    """
    out = Path(out)
    finished, resume = prepare(config, out)
    if finished is not None:
        return TeachResult(out, finished, int(finished["training"]["resumed_from"]))
    with signals.handled():  # a signal while loading: one line, nothing written
        return _teach(config, out, resume, threads=threads,
                      checkpoint_seconds=checkpoint_seconds, on_step=on_step,
                      stop_after=stop_after, snapshots=snapshots, snapshot_every=snapshot_every)


def _teach(config: TeachConfig, out: Path, resume: bool, *, threads: int,
           checkpoint_seconds: float, on_step: Callable[[Progress], None] | None,
           stop_after: int | None, snapshots: str | os.PathLike[str] | None,
           snapshot_every: int) -> TeachResult:
    """:func:`teach` once the folder and the environment passed the checks."""
    model, tok, source, digest = load_transformers(config.model)
    layers = chosen_layers(config, int(model.config.num_hidden_layers))
    check_stack(model, config.model)
    tree_list, keys = taught_trees(config, tok)
    with torch_threads(threads):
        trainer = Trainer(config, model, layers, tree_list)
        state = _State()
        ckpt = out / CHECKPOINT
        if resume:
            import torch

            held = torch.load(ckpt, weights_only=False)
            trainer.load(held)
            state = _State(int(held["step"]), list(held["losses"]), float(held["seconds"]),
                           float(held["cpu_seconds"]))
        resumed_from = state.step
        out.mkdir(parents=True, exist_ok=True)
        _run_steps(trainer, state, ckpt, checkpoint_seconds=checkpoint_seconds,
                   on_step=_with_snapshots(trainer, on_step, snapshots, snapshot_every),
                   stop_after=stop_after)
        if state.step < config.steps:
            return TeachResult(out, {}, resumed_from, trainer.model)
        base = {"spec": config.model, "official_id": source.official_id,
                "weights_hash": digest, "n_layers": int(model.config.num_hidden_layers)}
        info = teach_info(trainer, state, base, threads, resumed_from)
        _save(trainer, out, info, keys)
    ckpt.unlink(missing_ok=True)
    return TeachResult(out, info, resumed_from, trainer.model)


def _with_snapshots(trainer: Trainer, on_step: Callable[[Progress], None] | None,
                    folder: str | os.PathLike[str] | None, every: int
                    ) -> Callable[[Progress], None] | None:
    """``on_step``, also writing the adapters' weights into ``folder`` every ``every`` steps."""
    if folder is None:
        return on_step
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)

    def step(p: Progress) -> None:
        if p.step % every == 0 or p.step == p.steps:
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in trainer.adapter_state().items()},
                      str(path / f"step-{p.step:05d}.safetensors"))
        if on_step is not None:
            on_step(p)

    return step


def trained_prompts(folder: str | os.PathLike[str], tokenizer: Any = None) -> frozenset[str]:
    """The prompt keys of every read-out the adapter in ``folder`` was taught on: its
    :data:`PROMPTS` file; for an adapter taught before the keys were recorded, rebuilt from
    its ``teach.json`` with ``tokenizer`` (the base model's; one line if none is given)."""
    path = Path(folder)
    keys = path / PROMPTS
    if keys.is_file():
        return frozenset(line for line in keys.read_text().split() if line)
    info = _read_json(path / ADAPTER_INFO)
    if info is None or tokenizer is None:
        raise ParameterError(f"{path} holds no {PROMPTS} and no teach record to rebuild it "
                             "from with a tokenizer")
    options: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                               for k, v in dict(info["options"]).items()}
    config = TeachConfig(**options)
    return frozenset(taught_trees(config, tokenizer)[1])


def _env_params(env: Environment) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(env.params).items()}


def taught_trees(config: TeachConfig, tokenizer: Any) -> tuple[list[Tree], set[str]]:
    """The trees of every condition's training episodes, and the prompt keys of their
    read-outs (:func:`~belieflens.readouts.render.prompt_key`)."""
    out: list[Tree] = []
    keys: set[str] = set()
    for j, c in enumerate(config.conditions()):
        recs = taught_records(environment(config, c.params), c.episodes, c.seed)
        found, k = taught(tokenizer, recs)
        out += [dataclasses.replace(t, condition=j) for t in found]
        keys |= k
    return out, keys
