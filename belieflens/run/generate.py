"""Text generation on the loaded TransformerBridge model: a seeded, reproducible TextGenerator.

:class:`ModelGenerator` implements :class:`belieflens.episodes.generation.TextGenerator`
on a :class:`~belieflens.model.load.LoadedModel`:

- the messages are rendered with the model's chat template and its generation
  prompt (a BOS token is prepended the same way as for read-outs);
- one forward over the prompt fills a key/value cache, then one forward per new
  token reads it (the bridge honours the cache only with
  :func:`belieflens.model.kv_cache.install_cache_fix`, installed at model load;
  where the load-time self-check failed, every step re-runs the whole sequence);
- ``temperature == 0`` is greedy (argmax, ties to the lowest id); otherwise the
  next token is drawn from ``softmax(logits / temperature)`` (no top-k / top-p)
  on the CPU in float64 with a ``torch.Generator`` seeded from ``seed``, so a
  run is reproducible for a fixed seed, on any device;
- generation stops after ``max_new_tokens`` or at an end-of-sequence /
  end-of-turn token (not included in the text); special tokens are not decoded.
- the one-token decode steps run on :data:`DECODE_THREADS` CPU thread(s) (the
  setting is restored afterwards): they are too small to gain from more, and
  with other work on the two cores, 2 threads ran them ~8x slower than 1 here
  (0.3 s vs 2.3 s per token); the prompt runs on the caller's setting.

Every call can be recorded in a :class:`~belieflens.run.generation_log.GenerationLog`.
Several calls decode together in :mod:`belieflens.run.generate_batch`, and episodes
generate together in :mod:`belieflens.run.batched`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from belieflens.episodes.base import Message, Query
from belieflens.errors import BeliefLensError, ParameterError
from belieflens.model.load import LoadedModel
from belieflens.readouts.render import bos_policy
from belieflens.run.generation_log import (
    GeneratingEnvironment,
    GenerationLog,
    GenerationRecord,
    Role,
    bind_generators,
    score_messages,
    score_text,
)

END_OF_TURN_TOKENS: tuple[str, ...] = (
    "<|im_end|>",
    "<|eot_id|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end|>",
)
"""End-of-turn markers of common chat templates; those in a model's vocabulary stop generation."""

DECODE_THREADS = 1
"""CPU threads of the one-token decode steps (see the module docstring)."""

SCORE_ROWS = 32
"""Forward rows per batch when an environment scores read-outs (:meth:`ModelGenerator.score`)."""

SCORE_TOKENS = 16384
"""Padded tokens per batch when an environment scores read-outs."""

StopReason = Literal["eos", "length"]
"""Why generation ended: a stop token, or ``max_new_tokens`` reached."""


@dataclass(frozen=True)
class Generated:
    """The result of one generation: new token ids (stop token excluded), text, why it ended."""

    ids: tuple[int, ...]
    text: str
    stop: StopReason


def stop_token_ids(model: LoadedModel) -> frozenset[int]:
    """Token ids that end a reply: EOS ids of the tokenizer and generation config, and any
    :data:`END_OF_TURN_TOKENS` in the vocabulary."""
    tok = model.tokenizer
    ids: set[int] = set()
    if getattr(tok, "eos_token_id", None) is not None:
        ids.add(int(tok.eos_token_id))
    config = getattr(getattr(model.bridge, "original_model", None), "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(e) for e in eos)
    vocab = tok.get_vocab()
    ids.update(int(vocab[t]) for t in END_OF_TURN_TOKENS if t in vocab)
    return frozenset(ids)


def prompt_ids(tokenizer: Any, messages: tuple[Message, ...]) -> list[int]:
    """The token ids of ``messages`` under the chat template with the generation prompt."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise BeliefLensError(
            "this model's tokenizer has no chat template, so it cannot generate replies; "
            "use an instruct model"
        )
    chat = [{"role": m.role, "content": m.content} for m in messages]
    text = str(tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True))
    ids = [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]
    bos = bos_policy(tokenizer)
    if bos is not None and (not ids or ids[0] != bos):
        ids.insert(0, bos)
    return ids


def next_token(logits: Any, temperature: float, generator: Any) -> int:
    """Pick the next token from a ``[vocab]`` logit vector: argmax at temperature 0, else a
    draw from ``softmax(logits / temperature)`` with ``generator`` (computed on the CPU)."""
    import torch

    row = logits.detach().to("cpu", torch.float64)
    if temperature == 0.0:
        return int(torch.argmax(row).item())
    probs = torch.softmax(row / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator).item())


@dataclass(frozen=True)
class GenerationCall:
    """One request for generated text: the prompt and its settings (a row of a batch)."""

    messages: tuple[Message, ...]
    seed: int
    max_new_tokens: int
    temperature: float


def check_call(model: LoadedModel, call: GenerationCall) -> list[int]:
    """The prompt ids of ``call``, after checking its settings and that prompt and new tokens
    fit the model's context (else one line, :class:`ParameterError`)."""
    if call.max_new_tokens < 1:
        raise ParameterError(f"max_new_tokens = {call.max_new_tokens} is not allowed: >= 1")
    if not 0.0 <= call.temperature <= 5.0:
        raise ParameterError(
            f"temperature = {call.temperature} is not allowed: a number in [0, 5]")
    ids = prompt_ids(model.tokenizer, call.messages)
    n_ctx = int(getattr(model.bridge.cfg, "n_ctx", 0) or 0)
    if n_ctx and len(ids) + call.max_new_tokens > n_ctx:
        raise ParameterError(
            f"generation needs {len(ids)} prompt + {call.max_new_tokens} new tokens, more than "
            f"the model's context of {n_ctx}: use fewer turns or fewer new tokens"
        )
    return ids


def _seeded(seed: int) -> Any:
    import torch

    rng = torch.Generator(device="cpu")
    rng.manual_seed(int(seed))
    return rng


def generate(model: LoadedModel, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
             temperature: float, stop_ids: frozenset[int] | None = None) -> Generated:
    """Generate the assistant's reply to ``messages`` (see the module docstring for the rules).

    ``stop_ids`` replaces the model's stop tokens (:func:`stop_token_ids`) when given.
    """
    import torch

    call = GenerationCall(messages, seed, max_new_tokens, temperature)
    ids = check_call(model, call)
    bridge = model.bridge
    stops = stop_token_ids(model) if stop_ids is None else stop_ids
    device = next(bridge.original_model.parameters()).device
    rng = _seeded(seed)
    new: list[int] = []
    stop: StopReason = "length"
    threads = torch.get_num_threads()
    with torch.inference_mode():
        if model.info.prefix_reuse:
            logits, cache = bridge(
                torch.tensor([ids], device=device), return_type="logits_and_cache",
                use_cache=True, logits_to_keep=1,
            )
        else:
            logits, cache = bridge(torch.tensor([ids], device=device)), None
        if cache is not None and device.type == "cpu":
            torch.set_num_threads(min(threads, DECODE_THREADS))
        try:
            for step in range(max_new_tokens):
                tok = next_token(logits[0, -1], temperature, rng)
                if tok in stops:
                    stop = "eos"
                    break
                new.append(tok)
                if step == max_new_tokens - 1:
                    break
                if cache is not None:
                    logits = bridge(
                        torch.tensor([[tok]], device=device), past_key_values=cache,
                        logits_to_keep=1,
                    )
                else:
                    logits = bridge(torch.tensor([ids + new], device=device))
        finally:
            torch.set_num_threads(threads)
    text = str(model.tokenizer.decode(new, skip_special_tokens=True))
    return Generated(ids=tuple(new), text=text, stop=stop)


class ModelGenerator:
    """A :class:`~belieflens.episodes.generation.TextGenerator` on a loaded model.

    ``role`` says what the text is for (``reply``: the evaluated model's own
    replies; ``simulator``: simulated user messages); each call is appended to
    ``log`` when one is given.
    """

    def __init__(
        self, model: LoadedModel, *, role: Role = "reply", log: GenerationLog | None = None
    ) -> None:
        self.model = model
        self.role: Role = role
        self.log = log

    def __call__(self, messages: tuple[Message, ...], *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        """The generated reply text (stop token excluded)."""
        out = generate(
            self.model, messages, seed=seed, max_new_tokens=max_new_tokens,
            temperature=temperature,
        )
        if self.log is not None:
            self.log.add(self.record(
                GenerationCall(messages, seed, max_new_tokens, temperature), out))
        return out.text

    def record(self, call: GenerationCall, out: Generated) -> GenerationRecord:
        """The log record of ``call`` answered with ``out`` (episode not yet assigned)."""
        return GenerationRecord(
            role=self.role, model=self.model.info.official_id, seed=int(call.seed),
            temperature=float(call.temperature), max_new_tokens=int(call.max_new_tokens),
            messages=call.messages, text=out.text, tokens=len(out.ids), stop=out.stop,
        )

    def score(self, queries: Sequence[Query]) -> tuple[tuple[float, ...], ...]:
        """Per query, the log-probability of each option's whole continuation, computed as
        extraction computes it (same rendering and runner); each is logged (role ``score``)."""
        out = self.score_values(queries)
        if self.log is not None:
            records = self.score_records(queries, out)
            for i, rec in enumerate(records):
                # progress once per scored batch, not per read-out
                self.log.add(rec, notify=i == len(records) - 1)
        return out

    def score_values(self, queries: Sequence[Query], *,
                     budget: int = 0) -> tuple[tuple[float, ...], ...]:
        """:meth:`score`'s values, not logged. ``budget`` (bytes; 0: none) bounds the forward
        calls and the shared prefixes' retained caches as ``--max-memory`` bounds extraction's
        (:func:`belieflens.run.budget.plan_memory`)."""
        from belieflens.readouts.render import render
        from belieflens.run.budget import plan_memory
        from belieflens.run.runner import run_queries

        bos = bos_policy(self.model.tokenizer)
        tqs = [render(self.model.tokenizer, q, bos=bos) for q in queries]
        out: list[tuple[float, ...]] = [() for _ in tqs]
        if not tqs:
            return ()
        max_tokens, retain = SCORE_TOKENS, None
        if budget:
            info = self.model.info
            longest = max(len(t.context_ids) + max(len(c) for c in t.option_ids) for t in tqs)
            plan = plan_memory(self.model, budget, longest=longest, max_tokens=SCORE_TOKENS,
                               window=len(tqs), readout_bytes=8 * (info.n_layers + 1) *
                               info.d_model)
            max_tokens, retain = plan.max_tokens, plan.retained_bytes
        for idx, reads, _ in run_queries(self.model, tqs, max_rows=SCORE_ROWS,
                                         max_tokens=max_tokens, retain_bytes=retain):
            for i, r in zip(idx, reads, strict=True):
                out[i] = tuple(float(x) for x in r.option_logprob[: len(queries[i].options)])
        return tuple(out)

    def score_records(self, queries: Sequence[Query],
                      values: Sequence[Sequence[float]]) -> list[GenerationRecord]:
        """The log records of ``queries`` scored ``values`` (role ``score``)."""
        return [
            GenerationRecord(
                role="score", model=self.model.info.official_id, seed=0, temperature=0.0,
                max_new_tokens=0, messages=score_messages(q), text=score_text(q.options, lp),
                tokens=0, stop="score",
            )
            for q, lp in zip(queries, values, strict=True)
        ]


def bind_model(
    env: Any,
    model: LoadedModel,
    *,
    simulator: LoadedModel | None = None,
    on_record: Callable[[GenerationRecord], None] | None = None,
) -> GeneratingEnvironment:
    """``env`` with its replies generated by ``model`` and its simulated users by ``simulator``
    (default: ``model``), every generation logged per episode (stored by extraction)."""
    log = GenerationLog(on_record)
    reply = ModelGenerator(model, role="reply", log=log)
    sim = ModelGenerator(simulator if simulator is not None else model, role="simulator", log=log)
    return bind_generators(env, reply, simulator=sim, log=log)
