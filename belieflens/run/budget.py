"""Memory budgets: ``--max-memory`` (:func:`plan_memory`) and ``--batch-size auto``.

``--max-memory`` (default a quarter of the machine's memory) is split between one
forward call's working set, the read-outs of one window and the radix tree's retained
key/value caches, each sized from the model's shape (layers, key/value heads, head
dimension, d_model, dtype) and the study's longest read-out (:class:`MemoryPlan`).

``--batch-size auto`` fits a padded-token budget per forward batch into the budget.
Peak memory of one inference forward grows with the padded tokens ``T`` of the
batch and, through the attention mask and eager attention scores, with ``T * S`` for
sequence length ``S``. Per padded token this is roughly ``4 bytes * (4 d_model + 2 d_ff
+ S + 2 n_heads S)`` (hidden states, the MLP's two intermediate activations, the
mask, one layer's attention scores and their softmax); fused attention (SDPA, what the
radix-tree runner uses on plain rotary models: :mod:`belieflens.model.attention`)
never holds the scores, so its ``2 n_heads S`` term is dropped. ``bench/call_memory.py``
measures one call against this estimate. Logits are only computed at read positions.
The budget is a
fraction of the machine's memory (``MemTotal`` in ``/proc/meminfo`` on CPU, so the
same machine always gets the same batches and a resumed run computes identically;
the device's total memory on CUDA).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from belieflens.errors import ParameterError
from belieflens.model.attention import AttentionName, fast_modules
from belieflens.model.load import LoadedModel


@dataclass(frozen=True)
class Budget:
    """Rows and padded tokens allowed per forward batch."""

    max_rows: int
    max_tokens: int
    bytes_available: int


def available_bytes(device: str) -> int:
    """Total memory of ``device`` (deterministic for a machine, unlike free memory)."""
    if device.startswith("cuda"):
        import torch

        _, total = torch.cuda.mem_get_info()
        return int(total)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30


def bytes_per_token(model: LoadedModel, seq_len: int,
                    attention: AttentionName = "eager") -> int:
    """Estimated peak activation bytes per padded token at sequence length ``seq_len``, with
    eager attention (scores and softmax held) or fused (``sdpa``: neither held)."""
    cfg = model.bridge.cfg
    d_model = int(cfg.d_model)
    d_ff = int(getattr(cfg, "d_mlp", None) or 4 * d_model)
    heads = int(getattr(cfg, "n_heads", 8))
    scores = 0 if attention == "sdpa" else 2 * heads
    return _itemsize(model) * (4 * d_model + 2 * d_ff + (1 + scores) * max(seq_len, 1))


def runner_attention(model: LoadedModel, reuse: bool) -> AttentionName:
    """The attention extraction's forward calls use: fused (SDPA) when the radix-tree runner
    runs (``reuse``) on a model whose attention it can fuse, else the eager steps."""
    return "sdpa" if reuse and fast_modules(model.bridge) else "eager"


def auto_budget(
    model: LoadedModel, longest: int, *, fraction: float = 0.25, cap_tokens: int = 65536,
    budget: int | None = None, attention: AttentionName = "eager",
) -> Budget:
    """A batch budget using ``budget`` bytes (default ``fraction`` of available memory) for
    sequences up to ``longest``, attending as ``attention`` does."""
    avail = available_bytes(model.info.device)
    per = bytes_per_token(model, longest, attention)
    spend = int(avail * fraction) if budget is None else budget
    tokens = max(longest, min(cap_tokens, spend // per))
    rows = max(1, min(256, tokens // max(longest, 1)))
    return Budget(max_rows=rows, max_tokens=tokens, bytes_available=avail)


# --max-memory ------------------------------------------------------------------------------

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
SIZE_HELP = "a size such as 1.5GB, 800MiB or 2G (KB/MB/GB are powers of 1000, K/M/G and " \
    "KiB/MiB/GiB of 1024)"


def parse_size(text: str | int) -> int:
    """Bytes of a size written ``1.5GB``, ``800MiB``, ``2G`` or a whole number of bytes.

    ``KB``/``MB``/``GB``/``TB`` are powers of 1000; ``K``/``M``/``G``/``T`` and
    ``KiB``/``MiB``/``GiB``/``TiB`` powers of 1024. Anything else is one line naming
    ``--max-memory`` (:class:`~belieflens.errors.ParameterError`).
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text >= 1:
            return text
        raise ParameterError(f"option '--max-memory' = {text} is not allowed: {SIZE_HELP}")
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    unit = _UNITS.get(m.group(2).lower()) if m else None
    size = int(Decimal(m.group(1)) * unit) if m and unit is not None else 0  # exact
    if size < 1:
        raise ParameterError(f"option '--max-memory' = {text!r} is not allowed: {SIZE_HELP}")
    return size


def format_size(n: int) -> str:
    """``n`` bytes in GiB (two decimals), MiB (one) or KiB, rounded up: a size that, passed
    back as ``--max-memory``, is at least ``n``."""
    for unit, shift, places in (("GiB", 30, 2), ("MiB", 20, 1), ("KiB", 10, 0)):
        if n >= 1 << shift or unit == "KiB":
            scaled = -(-n * 10**places // (1 << shift))  # every digit kept, rounded up
            text = f"{Decimal(scaled).scaleb(-places):f}"
            return (text.rstrip("0").rstrip(".") if "." in text else text) + unit
    raise AssertionError("unreachable")


def default_memory(device: str) -> int:
    """The default ``--max-memory``: a quarter of the machine's (or device's) memory."""
    return available_bytes(device) // 4


def kv_bytes_per_token(model: LoadedModel) -> int:
    """Bytes of one position's keys and values in every layer (``2 L h_kv d_head dtype``)."""
    cfg = model.bridge.cfg
    heads = int(getattr(cfg, "n_key_value_heads", 0) or 0) or int(cfg.n_heads)
    d_head = int(getattr(cfg, "d_head", 0) or 0) or int(cfg.d_model) // int(cfg.n_heads)
    return 2 * model.info.n_layers * heads * d_head * _itemsize(model)


def _itemsize(model: LoadedModel) -> int:
    return 2 if model.info.dtype in ("bfloat16", "float16") else 4


HELD_SHARE = 0.125
"""The most of a ``--max-memory`` budget that computed read-outs waiting to be written hold."""


@dataclass(frozen=True)
class MemoryPlan:
    """How extraction spends a ``--max-memory`` budget (bytes, the model's weights apart).

    Attributes:
        budget: the whole budget.
        max_tokens: padded tokens per forward call (the options' value, lowered only when
            one call of it would not fit, never below the longest read-out; batches then
            differ, so results may differ in the last bits from a run under a larger budget).
        call_bytes: one forward call's working set: its padded keys and values and its
            activations at ``max_tokens`` padded tokens.
        held_rows: read-outs held in memory before they are written: a window's, or fewer
            when those would take more than :data:`HELD_SHARE` of the budget (they are then
            written as that many are done; what is computed does not change).
        window_bytes: the read-outs held (``held_rows`` of them).
        retained_bytes: what the radix tree's retained key/value caches may hold: the rest,
            at least ``max_tokens`` positions (the past of one call, held while it runs).
        minimum: the least budget that runs one read-out of the study.
    """

    budget: int
    max_tokens: int
    call_bytes: int
    held_rows: int
    window_bytes: int
    retained_bytes: int
    minimum: int


def call_bytes(model: LoadedModel, tokens: int, longest: int, *,
               attention: AttentionName = "eager") -> int:
    """Working set of one forward call of ``tokens`` padded tokens (rows times past plus new)
    for read-outs of up to ``longest`` tokens: its padded keys and values, activations, mask
    and (``eager``) one layer's attention scores (:func:`bytes_per_token`)."""
    return tokens * (kv_bytes_per_token(model) + bytes_per_token(model, longest, attention))


def plan_memory(
    model: LoadedModel, budget: int, *, longest: int, max_tokens: int, window: int,
    readout_bytes: int, attention: AttentionName = "eager",
) -> MemoryPlan:
    """Size a call, a window's read-outs and the retained caches under ``budget`` bytes.

    ``longest``: tokens of the study's longest read-out (context and continuation);
    ``window``: read-outs per window; ``readout_bytes``: the bytes of one read-out's stored
    values; ``attention``: how the forward calls attend (:func:`runner_attention`). The
    retained caches get at least a call's worth of keys and values (a call's past is held
    while it runs). A budget below what one read-out needs (one call of it, its prefix
    retained, its values) is one line that says the minimum
    (:class:`~belieflens.errors.ParameterError`).
    """
    kv = kv_bytes_per_token(model)
    per = 2 * kv + bytes_per_token(model, longest, attention)  # a call's token, retained past
    held = max(1, min(window, int(budget * HELD_SHARE) // max(readout_bytes, 1)))
    window_bytes = held * readout_bytes
    minimum = longest * per + readout_bytes
    if budget < minimum:
        raise ParameterError(
            f"option '--max-memory' = {format_size(budget)} is not allowed: one read-out of "
            f"this study ({longest} tokens) needs at least {format_size(minimum)}")
    tokens = min(max_tokens, max(longest, (budget - window_bytes) // per))
    call = call_bytes(model, tokens, longest, attention=attention)
    retained = max(tokens * kv, budget - call - window_bytes)
    return MemoryPlan(budget=budget, max_tokens=tokens, call_bytes=call, held_rows=held,
                      window_bytes=window_bytes, retained_bytes=retained, minimum=minimum)


# generation ---------------------------------------------------------------------------------

GEN_ROWS = 64
"""The most rows of one generation batch under ``--gen-batch auto`` (the budget may allow
fewer; a decode step reads every weight once, so rows beyond this gain little on a CPU)."""


def generation_bytes(model: LoadedModel, rows: int, prompt: int, new: int,
                     attention: AttentionName = "eager") -> int:
    """Peak working set of one generation batch of ``rows`` rows left-padded to ``prompt``
    tokens that decodes up to ``new`` tokens: its key/value cache at full length and the
    prompt's forward call attending as ``attention`` does (:func:`bytes_per_token`), with the
    last position's logits (float64 on the CPU for sampling)."""
    vocab = int(getattr(model.bridge.cfg, "d_vocab", 0) or 0)
    per_row = ((prompt + new) * kv_bytes_per_token(model)
               + prompt * bytes_per_token(model, prompt, attention) + 12 * vocab)
    return rows * per_row


def generation_batches(
    model: LoadedModel, prompts: list[int], new: list[int], *, budget: int, max_rows: int,
    attention: AttentionName = "eager",
) -> list[list[int]]:
    """Group generation requests (``prompts[i]`` prompt tokens, up to ``new[i]`` new ones)
    into batches of at most ``max_rows`` rows whose working set
    (:func:`generation_bytes`, attending as ``attention`` does) fits ``budget``; a request
    that alone exceeds it runs alone. Requests are taken shortest prompt first, so a batch
    pads little."""
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in sorted(range(len(prompts)), key=lambda i: (prompts[i], i)):
        grown = [*cur, i]
        need = generation_bytes(model, len(grown), max(prompts[j] for j in grown),
                                max(new[j] for j in grown), attention)
        if cur and (len(grown) > max_rows or need > budget):
            batches.append(cur)
            grown = [i]
        cur = grown
    if cur:
        batches.append(cur)
    return batches
