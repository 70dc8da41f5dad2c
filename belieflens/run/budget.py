"""``--batch-size auto``: a padded-token budget per forward batch that fits in memory.

Peak memory of one inference forward grows with the padded tokens ``T`` of the
batch and, through eager attention scores, with ``T * S`` for sequence length
``S``. Per padded token this is roughly ``4 bytes * (4 d_model + 2 d_ff +
n_heads * S)`` (hidden states, the MLP's two intermediate activations, one layer's
attention scores); logits are only computed at read positions. The budget is a
fraction of the machine's memory (``MemTotal`` in ``/proc/meminfo`` on CPU, so the
same machine always gets the same batches and a resumed run computes identically;
the device's total memory on CUDA).
"""

from __future__ import annotations

from dataclasses import dataclass

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


def bytes_per_token(model: LoadedModel, seq_len: int) -> int:
    """Estimated peak activation bytes per padded token at sequence length ``seq_len``."""
    cfg = model.bridge.cfg
    d_model = int(cfg.d_model)
    d_ff = int(getattr(cfg, "d_mlp", None) or 4 * d_model)
    heads = int(getattr(cfg, "n_heads", 8))
    itemsize = 2 if model.info.dtype in ("bfloat16", "float16") else 4
    return itemsize * (4 * d_model + 2 * d_ff + heads * max(seq_len, 1))


def auto_budget(
    model: LoadedModel, longest: int, *, fraction: float = 0.25, cap_tokens: int = 65536
) -> Budget:
    """A batch budget using ``fraction`` of available memory for sequences up to ``longest``."""
    avail = available_bytes(model.info.device)
    per = bytes_per_token(model, longest)
    tokens = max(longest, min(cap_tokens, int(avail * fraction) // per))
    rows = max(1, min(256, tokens // max(longest, 1)))
    return Budget(max_rows=rows, max_tokens=tokens, bytes_available=avail)
