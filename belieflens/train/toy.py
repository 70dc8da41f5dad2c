"""Train a small causal transformer on samples of a token-level process (the shipped toys).

The model is transformers' ``GPT2LMHeadModel`` (TransformerLens 4 has no ``HookedTransformer``;
belieflens loads models through ``TransformerBridge``): learned positions, pre-LayerNorm
blocks, ReLU MLPs, untied unembedding. Its vocabulary is the process's symbols (token id =
symbol id), then ``<bos>`` and ``<unk>``. A sequence of ``L`` observed tokens is fed as
``<bos> x_1 .. x_L`` (``n_positions = L + 1``): position ``t`` has seen ``t`` tokens (turn
``t``), and training asks it for token ``t + 1``, so every read-out position ``0..L`` is
trained (the training sequences are drawn with ``L + 1`` tokens).

Training is seeded and resumable: the initial weights depend on the seed only, the batch of
step ``k`` on ``(seed, k)`` only (one ``np.random.Generator`` per step), and a checkpoint
(weights, optimiser, step) is written atomically every ``checkpoint_every`` steps, so a run
killed and rerun continues and ends with the weights of an uninterrupted run, bit for bit on
the same machine and thread count. The result is a Hugging Face folder: ``config.json``,
``model.safetensors``, a word-level ``tokenizer.json`` over the symbols, and ``toy.json``
(the process, its parameters, the training configuration and provenance).

Speed: the training step runs the same GPT-2 function as transformers' module, written as a
few fused tensor calls over the module's own parameters (:func:`fast_logits`, equal to
``model(ids).logits`` to float rounding), with fused Adam; ``bench/toy_train.py`` measures
it against a plain PyTorch loop over the module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import importlib.metadata
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np
from jaxtyping import Float

from belieflens.envs.tokens.process import TokenProcess, get, param_values
from belieflens.errors import ParameterError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerFast

BOS = "<bos>"
"""The beginning-of-sequence token; its id is the number of symbols."""

UNK = "<unk>"
"""The unknown-word token, id ``BOS + 1``: never trained on, but tokenizer users (e.g.
TransformerLens's boot, which encodes ``"a"`` to detect a BOS) need one to encode any text."""

INFO_FILE = "toy.json"
"""The folder's record of process, configuration and provenance."""

CHECKPOINT = "checkpoint.pt"
"""The resumable state inside the output folder while training runs."""

Schedule = Literal["cosine", "constant"]
"""Learning-rate schedule after the linear warm-up."""

SCHEDULES: tuple[Schedule, ...] = get_args(Schedule)

Targets = Literal["sampled", "oracle"]
"""What each position is trained to predict: the sampled next token (cross-entropy to a
one-hot), or the oracle's next-token distribution given the same sampled prefix (cross-entropy
to it). The second is the first's conditional expectation given the prefix: the same expected
loss and expected gradient, hence the same minimiser, with less variance."""

TARGETS: tuple[Targets, ...] = get_args(Targets)

ToyName = Literal["coin-toy", "mess3-toy", "rrxor-toy"]
"""The toy models shipped in the package."""

TOY_NAMES: tuple[ToyName, ...] = get_args(ToyName)


@dataclass(frozen=True)
class ToyConfig:
    """Everything that determines a toy's weights.

    Attributes:
        process: a token-level process name (``belieflens.envs.tokens.process``).
        params: its parameters, as ``(name, value)`` pairs (a mapping is accepted; both are
            stored sorted by name); ``length`` sets the context.
        n_layer, d_model, n_head, d_mlp: the GPT-2 shape (``d_model / n_head`` per head).
        steps, batch: optimiser steps and sequences per step.
        lr, warmup, schedule, min_lr_ratio: Adam's rate, a linear warm-up over ``warmup``
            steps, then cosine decay to ``min_lr_ratio * lr`` (or constant).
        weight_decay: AdamW's decoupled weight decay (0: plain Adam).
        targets: :data:`Targets`.
        horizon: with ``horizon = k > 1`` (``targets="oracle"``, a hidden Markov process),
            training also asks each position for the oracle's joint distribution of the
            next ``k`` tokens, through an auxiliary linear head on the final LayerNorm's
            output, trained with the LM head and not saved (:func:`future_distribution`).
            The shipped model is the same GPT-2; only its training signal depends on more
            of the belief than the next token does.
        seed: the initial weights and every batch derive from it.
        checkpoint_every: steps between checkpoints.
    """

    process: str
    params: tuple[tuple[str, Any], ...] = ()
    n_layer: int = 4
    d_model: int = 64
    n_head: int = 1
    d_mlp: int = 256
    steps: int = 2000
    batch: int = 256
    lr: float = 3e-3
    warmup: int = 100
    schedule: Schedule = "cosine"
    min_lr_ratio: float = 0.05
    weight_decay: float = 0.0
    targets: Targets = "sampled"
    horizon: int = 1
    seed: int = 0
    checkpoint_every: int = 250

    def __post_init__(self) -> None:
        if isinstance(self.params, Mapping):
            object.__setattr__(self, "params", tuple(self.params.items()))
        try:
            pairs = tuple(sorted((str(k), v) for k, v in self.params))
        except (TypeError, ValueError):
            raise ParameterError(
                f"option 'params' = {self.params!r} is not allowed: (name, value) pairs"
            ) from None
        object.__setattr__(self, "params", pairs)

        def bad(name: str, allowed: str) -> ParameterError:
            return ParameterError(
                f"option '{name}' = {getattr(self, name)!r} is not allowed: {allowed}"
            )

        for name, lo, hi in (("n_layer", 1, 64), ("d_model", 2, 4096), ("n_head", 1, 64),
                             ("d_mlp", 1, 65536), ("steps", 1, 10**8), ("batch", 1, 1 << 20),
                             ("warmup", 0, 10**8), ("seed", 0, 2**63 - 1), ("horizon", 1, 8),
                             ("checkpoint_every", 1, 10**8)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise bad(name, f"an integer in {lo}..{hi}")
        if self.d_model % self.n_head:
            raise bad("n_head", f"a divisor of d_model = {self.d_model}")
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr <= 1):
            raise bad("lr", "a number in (0, 1]")
        if not (isinstance(self.min_lr_ratio, (int, float)) and 0 <= self.min_lr_ratio <= 1):
            raise bad("min_lr_ratio", "a number in [0, 1]")
        if not (isinstance(self.weight_decay, (int, float)) and 0 <= self.weight_decay <= 1):
            raise bad("weight_decay", "a number in [0, 1]")
        if self.schedule not in SCHEDULES:
            raise bad("schedule", "one of " + ", ".join(SCHEDULES))
        if self.targets not in TARGETS:
            raise bad("targets", "one of " + ", ".join(TARGETS))
        process = make_process(self)  # validates the process name and its parameters
        if self.horizon > 1 and (self.targets != "oracle" or getattr(process, "hmm", None)
                                 is None):
            raise bad("horizon", "1 unless targets is 'oracle' and the process is a hidden "
                      "Markov process")

    def as_dict(self) -> dict[str, Any]:
        """The configuration as JSON-ready values (``params`` as a dict)."""
        d = dataclasses.asdict(self)
        d["params"] = dict(self.params)
        if self.horizon == 1:  # the default is left out: earlier toys keep their fingerprint
            del d["horizon"]
        return d

    def fingerprint(self) -> str:
        """SHA-256 of the configuration: a checkpoint resumes only under the same one."""
        text = json.dumps(self.as_dict(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToyConfig:
        """The inverse of :meth:`as_dict`."""
        values = dict(d)
        values["params"] = tuple(dict(values.get("params", {})).items())
        return cls(**values)


def make_process(config: ToyConfig) -> TokenProcess:
    """The configuration's process."""
    return get(config.process, **dict(config.params))


TOYS: dict[ToyName, ToyConfig] = {
    "mess3-toy": ToyConfig(process="mess3", params=(("alpha", 0.85), ("length", 10),
                                                    ("x", 0.05)),
                           n_layer=4, d_model=64, n_head=1, steps=1500),
    "rrxor-toy": ToyConfig(process="rrxor", params=(("length", 10), ("p1", 0.5), ("p2", 0.5)),
                           n_layer=6, d_model=64, n_head=4, steps=2000, targets="oracle",
                           horizon=4),
    "coin-toy": ToyConfig(process="coin-tokens", params=(("a", 1.0), ("b", 1.0), ("bins", 10),
                                                         ("length", 32)),
                          n_layer=4, d_model=64, n_head=1, steps=800),
}
"""The configurations of the shipped toys (``belieflens/data/toys/<name>/``); all use Adam at
3e-3 with 100 warm-up steps and cosine decay, batches of 256 sequences, d_mlp 256, seed 0.

- ``mess3-toy``: the paper's Mess3 shape (4 layers, d_model 64, ReLU, LayerNorm, 10 tokens of
  context after ``<bos>``) and a quick run (Adam 3e-3, batch 256, 1,500 steps).
  GPT-2 ties the head width to ``d_model / n_head``, so the paper's single head of width 8
  cannot be written; one head of 64 is the single-head model closest to it (8 heads of 8
  would keep the width but not the single attention pattern) and the cheapest step.
- ``rrxor-toy``: 6 layers of d_model 64 with 4 heads of 16 (the paper's RRXOR model had 4
  heads), trained on the oracle's next-token distribution (:data:`Targets`). With the sampled
  next token the loss sat on the 2-token-XOR plateau (0.635 nats, position-mean optimum
  0.589) for 1,750 steps; with the oracle's distribution it left it within about 600 steps.
  4-layer models reached the optimal cross-entropy too (within 0.3% at every position) but
  held only 0.77-0.89 of the belief's variance linearly on the concatenated layers (three
  runs); 6 layers spread it over more layers (0.93). The next token needs one dimension of
  the 5-state belief, and next-token training let the rest fade (0.96 at best over 1,000 to
  6,000 steps); with ``horizon=4`` (the fewest next tokens whose joint distribution
  determines the belief) a training-only head asks for all of it.
- ``coin-toy``: 32 flips; counting needs one uniform attention pattern, so one head.
"""


def toy_dir(name: ToyName) -> Path:
    """The folder of a shipped toy inside the package."""
    if name not in TOY_NAMES:
        raise ParameterError(f"unknown toy {name!r}: choose one of " + ", ".join(TOY_NAMES))
    return Path(__file__).resolve().parents[1] / "data" / "toys" / name


# ---------------------------------------------------------------------------- the model
def build_model(config: ToyConfig, process: TokenProcess | None = None) -> Any:
    """The untrained model: GPT-2 of the configured shape, initialised from ``config.seed``
    (transformers' own initialisation under a private torch generator state)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    process = process or make_process(config)
    vocab = len(process.symbols) + 2
    bos = len(process.symbols)
    hf = GPT2Config(
        vocab_size=vocab, n_positions=process.length + 1, n_embd=config.d_model,
        n_layer=config.n_layer, n_head=config.n_head, n_inner=config.d_mlp,
        activation_function="relu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        layer_norm_epsilon=1e-5, tie_word_embeddings=False, bos_token_id=bos,
        eos_token_id=bos, pad_token_id=bos, architectures=["GPT2LMHeadModel"],
    )
    hf._attn_implementation = "eager"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = GPT2LMHeadModel(hf)
    model.train()
    return model


def build_tokenizer(symbols: tuple[str, ...]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer: symbol ``i`` is token ``i``, then ``<bos>`` (prepended to every
    encoded text) and ``<unk>`` (any other word); words are split on whitespace."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {s: i for i, s in enumerate(symbols)}
    vocab[BOS] = len(symbols)
    vocab[UNK] = len(symbols) + 1
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", special_tokens=[(BOS, len(symbols))]
    )
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, bos_token=BOS, eos_token=BOS, pad_token=BOS, unk_token=UNK,
        model_max_length=1 << 30, padding_side="left",
    )


def with_bos(tokens: np.ndarray, bos: int) -> np.ndarray:
    """``[episode, token]`` ids with the BOS id prepended: the model's input."""
    out = np.empty((tokens.shape[0], tokens.shape[1] + 1), dtype=np.int64)
    out[:, 0] = bos
    out[:, 1:] = tokens
    return out


def fast_logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """GPT-2's logits ``[batch, position, vocab]`` for ``ids`` (no padding), computed from the
    module's parameters with few, fused calls; equal to ``model(ids).logits`` to rounding."""
    import torch.nn.functional as F

    out: torch.Tensor = F.linear(fast_hidden(model, ids), model.lm_head.weight)
    return out


def fast_hidden(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """The final LayerNorm's output ``[batch, position, d_model]`` (what the LM head reads),
    computed as :func:`fast_logits` does."""
    import torch
    import torch.nn.functional as F

    tr = model.transformer
    cfg = model.config
    b, t = ids.shape
    d, h = cfg.n_embd, cfg.n_head
    hd = d // h
    eps = cfg.layer_norm_epsilon
    mask = torch.full((t, t), float("-inf"), device=ids.device).triu_(1)
    x = tr.wte.weight[ids] + tr.wpe.weight[:t]
    for blk in tr.h:
        a = F.layer_norm(x, (d,), blk.ln_1.weight, blk.ln_1.bias, eps).view(b * t, d)
        qkv = torch.addmm(blk.attn.c_attn.bias, a, blk.attn.c_attn.weight)
        q, k, v = qkv.view(b, t, 3, h, hd).permute(2, 0, 3, 1, 4).unbind(0)  # [b, h, t, hd]
        att = torch.matmul(q, k.transpose(-1, -2)).mul_(1.0 / math.sqrt(hd)).add_(mask)
        o = torch.matmul(att.softmax(-1), v).transpose(1, 2).reshape(b * t, d)
        x = x + torch.addmm(blk.attn.c_proj.bias, o, blk.attn.c_proj.weight).view(b, t, d)
        a = F.layer_norm(x, (d,), blk.ln_2.weight, blk.ln_2.bias, eps).view(b * t, d)
        f = torch.addmm(blk.mlp.c_fc.bias, a, blk.mlp.c_fc.weight).relu_()
        x = x + torch.addmm(blk.mlp.c_proj.bias, f, blk.mlp.c_proj.weight).view(b, t, d)
    out: torch.Tensor = F.layer_norm(x, (d,), tr.ln_f.weight, tr.ln_f.bias, eps)
    return out


def future_distribution(process: TokenProcess, tokens: np.ndarray, horizon: int
                        ) -> Float[np.ndarray, "episode turn word"]:
    """The oracle's joint distribution of the next ``horizon`` tokens after ``t`` tokens,
    ``t = 0..L``, for a hidden Markov process: ``hmm.next_tokens`` of the exact beliefs
    (:meth:`belieflens.envs.tokens.hmm.HMM.next_tokens`; ``horizon = 1`` is
    :meth:`TokenProcess.next_token`)."""
    hmm = getattr(process, "hmm", None)
    if hmm is None:
        raise ParameterError(f"option 'horizon' = {horizon} is not allowed: the process "
                             "is not a hidden Markov process")
    out: np.ndarray = hmm.next_tokens(process.beliefs(tokens), horizon)
    return out


def auxiliary_head(config: ToyConfig, process: TokenProcess) -> Any:
    """The training-only linear head from the final LayerNorm's output to the logits of the
    next ``config.horizon`` tokens' joint distribution (None when ``horizon`` is 1),
    initialised from ``config.seed`` under a private torch generator state."""
    import torch

    if config.horizon == 1:
        return None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return torch.nn.Linear(config.d_model, len(process.symbols) ** config.horizon)


# ---------------------------------------------------------------------------- training
def batch_rng(seed: int, step: int) -> np.random.Generator:
    """The generator of step ``step``'s batch: ``np.random.default_rng([seed, 1, step])``
    (stream 1; held-out data uses other streams)."""
    return np.random.default_rng([seed, 1, step])


def training_batch(process: TokenProcess, config: ToyConfig, step: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(inputs, targets)`` of one step: ``L + 1`` tokens per sequence, inputs ``<bos>
    x_1..x_L``; targets ``x_1..x_{L+1}`` (ids, ``[batch, L + 1]``) or, under
    ``targets="oracle"``, the oracle's next-token distributions at turns ``0..L``
    (``[batch, L + 1, symbol]``, float32)."""
    tokens = process.sample_batch(config.batch, batch_rng(config.seed, step),
                                  length=process.length + 1).tokens
    inputs = with_bos(tokens[:, :-1], len(process.symbols))
    if config.targets == "oracle":
        dist = process.next_token(tokens[:, :-1]).astype(np.float32)
        return inputs, dist
    return inputs, tokens


def learning_rate(config: ToyConfig, step: int) -> float:
    """The learning rate at (0-based) ``step``."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    if config.schedule == "constant":
        return config.lr
    span = max(config.steps - config.warmup, 1)
    frac = min((step - config.warmup) / span, 1.0)
    lo = config.lr * config.min_lr_ratio
    return lo + 0.5 * (config.lr - lo) * (1.0 + math.cos(math.pi * frac))


@dataclass(frozen=True)
class Progress:
    """One report of :func:`train` to its ``on_step`` callback."""

    step: int
    steps: int
    loss: float
    """Mean training loss of this step (nats/token)."""
    optimal: float
    """The optimal predictor's expected loss on the same positions."""
    tokens_per_s: float


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` produced."""

    path: Path
    config: ToyConfig
    seconds: float
    """Wall time of the steps this call ran (0 if the folder was already complete)."""
    resumed_from: int
    """The step the run resumed from (0: a fresh start)."""
    final_loss: float
    """Mean training loss over the last 5% of steps."""
    optimal: float
    info: dict[str, Any] = field(default_factory=dict)


def _git_commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def atomic_torch_save(obj: object, path: Path) -> None:
    """``torch.save`` into ``path`` atomically (a temporary file synced, then renamed)."""
    import torch

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ckpt-")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's CPU threads set to ``n`` for the block (0: unchanged), restored after."""
    import torch

    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _step(model: Any, aux: Any, optim: Any, process: TokenProcess, config: ToyConfig,
          step: int, vocab: int) -> tuple[float, int]:
    """One optimiser step on training batch ``step``; its next-token loss and input tokens
    (the auxiliary head's loss, if any, is added to the loss that is minimised)."""
    import torch
    import torch.nn.functional as F

    inputs, targets = training_batch(process, config, step)
    for group in optim.param_groups:
        group["lr"] = learning_rate(config, step)
    hidden = fast_hidden(model, torch.from_numpy(inputs))
    loss = _loss(F.linear(hidden, model.lm_head.weight), torch.from_numpy(targets), vocab)
    total = loss
    if aux is not None:  # the next `horizon` tokens' joint distribution after x_1..x_t
        future = future_distribution(process, inputs[:, 1:], config.horizon)
        total = loss + _loss(aux(hidden), torch.from_numpy(future.astype(np.float32)),
                             future.shape[-1])
    optim.zero_grad(set_to_none=True)
    total.backward()  # type: ignore[no-untyped-call]
    optim.step()
    return float(loss.detach()), int(inputs.size)


def _checkpoint(fp: str, step: int, model: Any, aux: Any, optim: Any, losses: list[float],
                seconds: float) -> dict[str, Any]:
    """What a checkpoint holds: enough to resume at ``step`` bit for bit."""
    return {"fingerprint": fp, "step": step, "model": model.state_dict(),
            "aux": None if aux is None else aux.state_dict(),
            "optim": optim.state_dict(), "losses": losses, "seconds": seconds}


def _read_info(out: Path) -> dict[str, Any] | None:
    try:
        info: dict[str, Any] = json.loads((out / INFO_FILE).read_text())
    except (OSError, ValueError):
        return None
    return info


def _resume_state(out: Path, ckpt_path: Path, fp: str, overwrite: bool) -> dict[str, Any] | None:
    """The checkpoint to resume from (``None``: start afresh, clearing ``out`` if
    ``overwrite``); one line if ``out`` holds something else and ``overwrite`` is off."""
    import torch

    state: dict[str, Any] | None = None
    if ckpt_path.exists():
        try:
            state = torch.load(ckpt_path, weights_only=False)
        except Exception:  # a damaged checkpoint: start over only if allowed
            state = None
            if not overwrite:
                raise ParameterError(
                    f"{ckpt_path} cannot be read; pass overwrite to start again"
                ) from None
        if state is not None and state.get("fingerprint") != fp:
            if not overwrite:
                raise ParameterError(
                    f"{out} holds a checkpoint of another configuration; pass overwrite to "
                    "discard it"
                )
            state = None
    elif out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ParameterError(
            f"{out} is not empty and holds no toy of this configuration; pass overwrite "
            "to replace it"
        )
    if state is None and out.is_dir() and overwrite:
        shutil.rmtree(out)
    return state


def train(config: ToyConfig, out: str | os.PathLike[str], *, overwrite: bool = False,
          threads: int = 0, progress: bool = True,
          on_step: Callable[[Progress], None] | None = None,
          stop_after: int | None = None) -> TrainResult:
    """Train ``config``'s toy into the folder ``out`` (created; resumed if it holds a
    checkpoint of the same configuration).

    ``overwrite`` discards a folder of another configuration (else one line,
    :class:`ParameterError`); a folder already holding this configuration's finished toy is
    returned as is. ``threads``: torch CPU threads (0: keep). ``progress``: a rich progress
    bar with the loss next to the optimal cross-entropy. ``stop_after``: stop (with a
    checkpoint) after that many steps of this call, as a kill would (for tests).
    """

    out = Path(out)
    process = make_process(config)
    fp = config.fingerprint()
    info = _read_info(out)
    ckpt_path = out / CHECKPOINT
    if out.exists() and not out.is_dir():
        raise ParameterError(f"option '--out' = '{out}' is not allowed: it is a file")
    if info is not None and info.get("fingerprint") == fp and not ckpt_path.exists():
        return _result_from_info(out, config, info)
    state = _resume_state(out, ckpt_path, fp, overwrite)
    out.mkdir(parents=True, exist_ok=True)

    model = build_model(config, process)
    aux = auxiliary_head(config, process)
    optim = _optimizer(model, aux, config)
    start = 0
    losses: list[float] = []
    seconds_before = 0.0
    if state is not None:
        model.load_state_dict(state["model"])
        if aux is not None:
            aux.load_state_dict(state["aux"])
        optim.load_state_dict(state["optim"])
        start = int(state["step"])
        losses = list(state["losses"])
        seconds_before = float(state["seconds"])
    optimal_per_pos = optimal_per_position(process)
    optimal = float(optimal_per_pos.mean())
    vocab = len(process.symbols) + 2
    with torch_threads(threads), _bar(progress, config.steps, start) as bar:
        t0 = time.perf_counter()
        step = start
        done_here = 0
        tokens_done = 0
        while step < config.steps:
            if stop_after is not None and done_here >= stop_after:
                break
            loss, n_tokens = _step(model, aux, optim, process, config, step, vocab)
            losses.append(loss)
            step += 1
            done_here += 1
            tokens_done += n_tokens
            elapsed = time.perf_counter() - t0
            report = Progress(step, config.steps, losses[-1], optimal,
                              tokens_done / elapsed if elapsed > 0 else 0.0)
            bar(report)
            if on_step is not None:
                on_step(report)
            if step % config.checkpoint_every == 0 and step < config.steps:
                atomic_torch_save(_checkpoint(fp, step, model, aux, optim, losses,
                                               seconds_before + time.perf_counter() - t0),
                                   ckpt_path)
        seconds = time.perf_counter() - t0
    if step < config.steps:  # stopped early: leave a checkpoint at the step reached
        atomic_torch_save(_checkpoint(fp, step, model, aux, optim, losses,
                                      seconds_before + seconds), ckpt_path)
        return TrainResult(out, config, seconds, start, _tail_mean(losses), optimal)
    info = _save(model, process, config, out, losses=losses, optimal=optimal_per_pos,
                 seconds=seconds_before + seconds, threads=threads, resumed_from=start)
    ckpt_path.unlink(missing_ok=True)
    return TrainResult(out, config, seconds, start, _tail_mean(losses), optimal, info)


def _loss(logits: torch.Tensor, targets: torch.Tensor, vocab: int) -> torch.Tensor:
    """Mean cross-entropy per position: to token ids, or to distributions over the symbols
    (the BOS and UNK columns, never targets, get probability 0)."""
    import torch
    import torch.nn.functional as F

    if targets.dtype == torch.long:
        return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    logp = logits.log_softmax(-1)[..., : targets.shape[-1]]
    return -(targets * logp).sum(-1).mean()


def optimal_per_position(process: TokenProcess, *, samples: int = 4096) -> np.ndarray:
    """The optimal predictor's cross-entropy at each trained position ``0..L`` (nats): exact
    where the process can enumerate its mixed states to depth ``L``, else estimated as the
    mean entropy of the oracle's next-token distribution over ``samples`` seeded sequences
    (an unbiased estimate of the same quantity)."""
    try:
        return process.optimal_cross_entropy(process.length + 1)
    except ParameterError:
        tokens = process.sample_batch(samples, np.random.default_rng([0, 2]),
                                      length=process.length).tokens
        q = process.next_token(tokens)
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.where(q > 0, q * np.log(np.where(q > 0, q, 1.0)), 0.0).sum(-1)
        out: np.ndarray = h.mean(axis=0)
        return out


def _tail_mean(losses: list[float]) -> float:
    if not losses:
        return float("nan")
    n = max(1, len(losses) // 20)
    return float(np.mean(losses[-n:]))


def _optimizer(model: Any, aux: Any, config: ToyConfig) -> torch.optim.Optimizer:
    import torch

    params = list(model.parameters()) + ([] if aux is None else list(aux.parameters()))
    if config.weight_decay:
        return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay,
                                 fused=True)
    return torch.optim.Adam(params, lr=config.lr, fused=True)


@contextlib.contextmanager
def _bar(enabled: bool, total: int, start: int) -> Iterator[Callable[[Progress], None]]:
    if not enabled:
        yield lambda _: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress

    columns = (
        TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]} · optimal {task.fields[optimal]} · "
                   "{task.fields[tps]} tok/s"),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
    )
    bar = RichProgress(*columns, transient=False)
    task = bar.add_task("train", total=total, completed=start, loss="-", optimal="-", tps="-")
    ema: list[float] = []

    def update(p: Progress) -> None:
        ema.append(p.loss if not ema else 0.95 * ema[-1] + 0.05 * p.loss)
        if p.step % 10 == 0 or p.step == p.steps:
            bar.update(task, completed=p.step, loss=f"{ema[-1]:.4f}",
                       optimal=f"{p.optimal:.4f}", tps=f"{p.tokens_per_s:,.0f}")

    bar.start()
    try:
        yield update
    finally:
        bar.stop()


def _save(model: Any, process: TokenProcess, config: ToyConfig, out: Path, *,
          losses: list[float], optimal: np.ndarray, seconds: float, threads: int,
          resumed_from: int) -> dict[str, Any]:
    """Write the Hugging Face folder (weights, config, tokenizer) and ``toy.json``."""
    import torch

    model.eval()
    model.config._name_or_path = f"belieflens-toy-{config.process}"
    model.save_pretrained(out, safe_serialization=True)
    build_tokenizer(process.symbols).save_pretrained(out)
    info: dict[str, Any] = {
        "kind": "belieflens toy",
        "process": config.process,
        "process_params": param_values(process.params),
        "symbols": list(process.symbols),
        "states": list(process.states),
        "bos_token": BOS,
        "unk_token": UNK,
        "bos_id": len(process.symbols),
        "input": "<bos> x_1 .. x_L: position t has seen t tokens (turn t) and predicts x_{t+1}",
        "transition": _transition(process),
        "config": config.as_dict(),
        "fingerprint": config.fingerprint(),
        "training": {
            "steps": config.steps,
            "tokens": config.steps * config.batch * (process.length + 1),
            "seconds": round(seconds, 1),
            "threads": threads or torch.get_num_threads(),
            "resumed_from": resumed_from,
            "final_loss": round(_tail_mean(losses), 6),
            "optimal_loss": round(float(np.mean(optimal)), 6),
            "optimal_per_position": [round(float(v), 6) for v in optimal],
            "loss_every_50_steps": [round(float(np.mean(losses[i:i + 50])), 5)
                                    for i in range(0, len(losses), 50)],
            **({} if config.horizon == 1 else {"auxiliary_head": (
                f"linear, final LayerNorm -> the oracle's joint distribution of the next "
                f"{config.horizon} tokens; trained with the LM head, not saved; the losses "
                "above are the next-token loss alone")}),
        },
        "provenance": {
            "belieflens_git_commit": _git_commit(),
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "torch": _version("torch"),
            "transformers": _version("transformers"),
            "numpy": _version("numpy"),
        },
    }
    (out / INFO_FILE).write_text(json.dumps(info, indent=1) + "\n")
    return info


def _transition(process: TokenProcess) -> list[Any] | None:
    """A hidden Markov process's ``T[token, from, to]`` as nested lists (None otherwise)."""
    hmm = getattr(process, "hmm", None)
    return None if hmm is None else np.asarray(hmm.transition).tolist()


def _result_from_info(out: Path, config: ToyConfig, info: Mapping[str, Any]) -> TrainResult:
    tr = info.get("training", {})
    return TrainResult(out, config, 0.0, int(tr.get("resumed_from", 0)),
                       float(tr.get("final_loss", float("nan"))),
                       float(tr.get("optimal_loss", float("nan"))), dict(info))


# ---------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class Toy:
    """A trained toy loaded with transformers: the model (eval mode), its tokenizer, its
    process and ``toy.json``."""

    model: Any
    tokenizer: Any
    process: TokenProcess
    info: dict[str, Any]

    @property
    def bos_id(self) -> int:
        """The BOS token id (the number of symbols)."""
        return len(self.process.symbols)


def load_toy(path: str | os.PathLike[str]) -> Toy:
    """Load a toy folder (or a shipped toy's name, e.g. ``mess3-toy``) with transformers."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    name = str(path)
    folder = toy_dir(name) if name in TOY_NAMES else Path(path)
    info = _read_info(folder)
    if info is None or info.get("kind") != "belieflens toy":
        raise ParameterError(f"{folder} is not a belieflens toy folder (no valid {INFO_FILE})")
    model: Any = GPT2LMHeadModel.from_pretrained(folder, local_files_only=True)
    model.eval()
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    process = get(str(info["process"]), **dict(info["process_params"]))
    return Toy(model=model, tokenizer=tok, process=process, info=info)


def residuals(model: Any, ids: np.ndarray, *, batch: int = 2048
              ) -> tuple[np.ndarray, np.ndarray]:
    """``(resid, logprob)`` of a model on ``ids`` ``[episode, position]`` (no padding):
    ``resid[layer, episode, position, d_model]`` (float32) with belieflens's layer
    convention (0 = the embeddings, l = block l-1's output; the last layer is *before* the
    final LayerNorm, unlike transformers' last hidden state) and the next-token
    ``logprob[episode, position, vocab]``.

    Layers 0..n-1 are transformers' ``output_hidden_states``; the last block's output is
    read by a forward pre-hook on the final LayerNorm.
    """
    import torch

    n_layer = int(model.config.n_layer)
    n, t = ids.shape
    resid = np.empty((n_layer + 1, n, t, int(model.config.n_embd)), dtype=np.float32)
    logprob = np.empty((n, t, int(model.config.vocab_size)), dtype=np.float32)
    seen: list[torch.Tensor] = []
    hook = model.transformer.ln_f.register_forward_pre_hook(
        lambda _m, args: seen.append(args[0].detach())
    )
    try:
        with torch.inference_mode():
            for lo in range(0, n, batch):
                chunk = torch.from_numpy(np.ascontiguousarray(ids[lo:lo + batch]))
                out = model(input_ids=chunk, output_hidden_states=True)
                for layer in range(n_layer):
                    resid[layer, lo:lo + len(chunk)] = out.hidden_states[layer].numpy()
                resid[n_layer, lo:lo + len(chunk)] = seen.pop().numpy()
                logprob[lo:lo + len(chunk)] = out.logits.log_softmax(-1).numpy()
    finally:
        hook.remove()
    return resid, logprob
