"""Extraction: environment -> queries -> tokens -> batched forward -> cache file."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack, get_args

import numpy as np

from belieflens.dims import QUERY
from belieflens.episodes.base import Environment, Query
from belieflens.errors import InterruptedRunError, ParameterError, at_least, choice
from belieflens.heap import release_freed_memory
from belieflens.lens.head import final_norm, unembedding
from belieflens.model.attention import AttentionName
from belieflens.model.load import LoadedModel
from belieflens.readouts.render import TokenizedQuery, bos_policy, render, token_texts
from belieflens.run import resume, runner
from belieflens.run.budget import (
    SIZE_HELP,
    MemoryPlan,
    auto_budget,
    default_memory,
    parse_size,
    plan_memory,
    runner_attention,
)
from belieflens.run.checkpoint import CHECKPOINT_SECONDS, Saver, stopped_before
from belieflens.run.generation_log import log_columns
from belieflens.run.signals import Stop
from belieflens.store.file import (
    STR,
    PartialFile,
    Sizes,
    StoreDType,
    VarSpec,
    allocation_bytes,
    chunk_rows,
    create_partial,
    partial_path,
    text_bytes,
)
from belieflens.store.fingerprint import (
    FINGERPRINT_ATTR,
    STUDY_ATTR,
    Study,
    StudyModel,
    StudyOptions,
    queries_hash,
)
from belieflens.store.provenance import provenance
from belieflens.types import Delivery, PaddingSide, StoreDTypeName


@dataclass(frozen=True)
class QueryRecord:
    """One read-out with what it is: the unit of a cache file's ``query`` dimension."""

    episode: int
    turn: int
    probe: str
    kind: str
    delivery: Delivery
    rotation: int
    labels: tuple[str, ...]
    oracle: tuple[float, ...] | None
    query: Query
    truth: Mapping[str, float | str] = field(default_factory=dict)
    state: tuple[float, ...] | None = None
    """The hidden-state belief of a token-level process (``belief_state``), or ``None``."""
    state_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Progress:
    """A progress report: rows done of total, tokens processed so far."""

    done: int
    total: int
    tokens: int
    seconds: float
    resumed: int = 0
    """Rows already complete in a resumed partial file (not computed again)."""


PADDING_SIDES: tuple[PaddingSide, ...] = get_args(PaddingSide)
STORE_DTYPE_NAMES: tuple[StoreDTypeName, ...] = get_args(StoreDTypeName)


class ExtractKeywords(TypedDict, total=False):
    """:class:`ExtractOptions` by the command line's names (``--batch-size`` is
    ``batch_size``, ``--no-prefix-reuse`` is ``prefix_reuse=False``)."""

    episodes: int
    seed: int
    batch_size: int | str
    """Rows per forward batch (>= 1), or ``auto``: fit the ``max_memory`` budget (default a
    quarter of the machine's memory; a whole number may come as text, as from
    ``--batch-size``)."""
    max_tokens: int
    row_tokens: int
    threads: int
    padding: PaddingSide
    save_logits: bool
    resid_dtype: StoreDTypeName
    cont_resid: bool
    prefix_reuse: bool
    window: int
    max_memory: int | str
    """The memory budget in bytes, or a size as text (``1.5GB``, ``800MiB``, ``2G``), or
    ``auto``: a quarter of the machine's memory (:func:`belieflens.run.budget.parse_size`)."""
    gen_batch: int | str
    """Most rows per generation batch and episodes generating at once (>= 1; 1 is the
    one-at-a-time path), or ``auto``: as many as fit ``max_memory``, up to
    :data:`~belieflens.run.budget.GEN_ROWS` (a whole number may come as text)."""


RENAMED: dict[str, str] = {"padding": "padding_side", "prefix_reuse": "reuse_prefix"}
"""Keywords of :class:`ExtractKeywords` whose field has another name (``batch_size`` becomes
``max_rows`` through :func:`max_rows`)."""


def max_rows(batch_size: int | str, option: str = "--batch-size") -> int:
    """``--batch-size`` as :attr:`ExtractOptions.max_rows` (or ``--gen-batch`` as
    :attr:`ExtractOptions.gen_batch`, named by ``option``): ``auto`` is 0, else a whole number
    >= 1 (or its text); anything else is one line (:class:`ParameterError`)."""
    if batch_size == "auto":
        return 0
    value: object = batch_size
    if isinstance(batch_size, str):
        with contextlib.suppress(ValueError):
            value = int(batch_size)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(f"option '{option}' = {value} is not allowed: >= 1, or auto")
    return value


def max_memory(size: int | str) -> int:
    """``--max-memory`` as :attr:`ExtractOptions.max_memory`: ``auto`` is 0, else its bytes
    (:func:`belieflens.run.budget.parse_size`; anything else is one line)."""
    return 0 if size == "auto" else parse_size(size)


@dataclass(frozen=True)
class ExtractOptions:
    """Options of one extraction run, each checked here (one line naming its command-line
    option, :class:`ParameterError`) however the record is made.

    The record is written to the file as it is (``extract_options``); :meth:`of` makes it from
    the command line's names, which :func:`belieflens.extract` also takes as keywords.

    Attributes:
        episodes: episodes of the environment (``--episodes``).
        seed: the study's seed; episode i is seeded from ``(seed, i)`` (``--seed``).
        max_tokens: padded tokens per forward batch (``--max-tokens``).
        save_logits: also store the full next-token log-probs (``logprobs[query, vocab]``).
        padding_side: how rows of a batch are padded (``--padding``).
        resid_dtype: how residuals are stored (``--resid-dtype``; float16 is lossy).
        threads: torch's CPU threads (0: torch's default; not part of the study).
        reuse_prefix: run the token radix tree (``False``: every query on its full prompt,
            ``--no-prefix-reuse``).
        cont_resid: also store residuals at every continuation token (``cont_resid``).
        max_memory: the memory budget in bytes, the model's weights apart (``--max-memory``;
            0: a quarter of the machine's memory). It sizes the forward calls and the
            key/value caches kept for shared prefixes (:func:`belieflens.run.budget.plan_memory`);
            it is not part of the study, so a run may be resumed under another budget.
        gen_batch: the most rows of one generation batch, and of episodes generating at once
            (``--gen-batch``; 1: one text at a time, 0: auto, as many as ``max_memory`` fits
            up to :data:`~belieflens.run.budget.GEN_ROWS`). Not part of the study: its texts
            are (each row decodes on its own seed), and a resumed run that generated other
            text is refused by the study's fingerprint.

    Examples:
        >>> options = belieflens.ExtractOptions.of(episodes=2, seed=0, batch_size="auto")
        >>> options.episodes, options.max_rows, options.window
        (2, 0, 1024)
        >>> belieflens.ExtractOptions.of(max_memory="1.5GB").max_memory
        1500000000
        >>> belieflens.ExtractOptions(episodes=0)
        Traceback (most recent call last):
        belieflens.errors.ParameterError: option '--episodes' = 0 is not allowed: >= 1
    """

    episodes: int = 4
    seed: int = 0
    max_rows: int = 16
    """Rows per forward batch; 0 = auto (a memory budget, see :mod:`belieflens.run.budget`)."""
    max_tokens: int = 8192
    row_tokens: int = runner.ROW_TOKENS
    """Tokens per row when the radix tree's edges are packed under a tree mask (fewer,
    fuller forward calls; :func:`belieflens.run.trie.pack`); 0: an edge per row."""
    save_logits: bool = False
    padding_side: PaddingSide = "right"
    resid_dtype: StoreDTypeName = "float32"
    window: int = 1024
    """Queries per written window: the resume unit, and the span whose shared tokens are
    computed once (smaller windows recompute more of the tokens that queries share)."""
    threads: int = 0
    reuse_prefix: bool = True
    cont_resid: bool = False
    max_memory: int = 0
    gen_batch: int = 0

    def __post_init__(self) -> None:
        at_least("--episodes", self.episodes, 1)
        at_least("--seed", self.seed, 0)
        at_least("--batch-size", self.max_rows, 0, ">= 1, or auto")
        at_least("--max-tokens", self.max_tokens, 1)
        at_least("--row-tokens", self.row_tokens, 0)
        at_least("--window", self.window, 1)
        at_least("--threads", self.threads, 0)
        at_least("--max-memory", self.max_memory, 0, SIZE_HELP)
        at_least("--gen-batch", self.gen_batch, 0, ">= 1, or auto")
        choice("--padding", self.padding_side, PADDING_SIDES)
        choice("--resid-dtype", self.resid_dtype, STORE_DTYPE_NAMES)

    @classmethod
    def of(cls, **keywords: Unpack[ExtractKeywords]) -> ExtractOptions:
        """The options named as on the command line (:class:`ExtractKeywords`); those not
        given keep their defaults."""
        fields: dict[str, Any] = {RENAMED.get(k, k): v for k, v in keywords.items()}
        if "batch_size" in keywords:
            fields["max_rows"] = max_rows(fields.pop("batch_size"))
        if "max_memory" in keywords:
            fields["max_memory"] = max_memory(fields["max_memory"])
        if "gen_batch" in keywords:
            fields["gen_batch"] = max_rows(fields["gen_batch"], "--gen-batch")
        return cls(**fields)


def records(env: Environment, episodes: int, seed: int) -> Iterator[QueryRecord]:
    """Flatten an environment's episodes into query records, in a deterministic order."""
    for ep in env.episodes(episodes, seed):
        for turn in ep.turns:
            for probe in turn.probes:
                for q in probe.queries:
                    yield QueryRecord(
                        episode=ep.index, turn=turn.index, probe=probe.name, kind=probe.kind,
                        delivery=probe.delivery, rotation=q.rotation, labels=probe.labels,
                        oracle=probe.oracle, query=q, truth=ep.truth,
                        state=probe.state, state_labels=probe.state_labels,
                    )


def _pad2(rows: Sequence[Sequence[int]], width: int) -> np.ndarray:
    out = np.full((len(rows), width), -1, dtype=np.int32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


TRUTH_PREFIX = "truth_"
"""Episode truth values (latent state, scenario variables) are stored as ``truth_<key>``."""


def truth_schema(recs: Sequence[QueryRecord]) -> tuple[VarSpec, ...]:
    """One ``(query,)`` variable per episode-truth key: text if any value is text, else float."""
    kinds: dict[str, StoreDType] = {}
    for r in recs:
        for k, v in r.truth.items():
            if isinstance(v, str) or kinds.get(k) == STR:
                kinds[k] = STR
            else:
                kinds.setdefault(k, "f8")
    return tuple(
        VarSpec(f"{TRUTH_PREFIX}{k}", (QUERY,), kind, f"episode truth {k!r}")
        for k, kind in sorted(kinds.items())
    )


def _truth_rows(recs: Sequence[QueryRecord], schema: Sequence[VarSpec]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for spec in schema:
        key = spec.name[len(TRUTH_PREFIX):]
        if spec.dtype == STR:
            out[spec.name] = np.array([str(r.truth.get(key, "")) for r in recs], dtype=object)
        else:
            out[spec.name] = np.array(
                [float(r.truth.get(key, np.nan)) for r in recs], dtype=np.float64
            )
    return out


def _static_rows(
    recs: Sequence[QueryRecord], tqs: Sequence[TokenizedQuery], sizes: Sizes,
    lens_index: dict[int, int], env_name: str,
) -> dict[str, np.ndarray]:
    n = len(recs)
    option_ids = np.full((n, sizes.option, sizes.cont_token), -1, dtype=np.int32)
    lens_idx = np.full_like(option_ids, -1)
    outcome = np.full((n, sizes.option), -1, dtype=np.int32)
    labels = np.full((n, sizes.outcome), "", dtype=object)
    oracle = np.full((n, sizes.outcome), np.nan)
    for i, (rec, tq) in enumerate(zip(recs, tqs, strict=True)):
        for j, cont in enumerate(tq.option_ids):
            option_ids[i, j, : len(cont)] = cont
            lens_idx[i, j, : len(cont)] = [lens_index[t] for t in cont]
        outcome[i, : len(tq.outcome)] = tq.outcome
        labels[i, : len(rec.labels)] = rec.labels
        if rec.oracle is not None:
            oracle[i, : len(rec.oracle)] = rec.oracle
    return {
        "input_ids": _pad2([tq.context_ids for tq in tqs], sizes.token),
        "context_span": _pad2([tq.spans for tq in tqs], sizes.token),
        "answer_pos": np.array([tq.answer_pos for tq in tqs], dtype=np.int32),
        "option_ids": option_ids,
        "option_lens_index": lens_idx,
        "outcome": outcome,
        "outcome_label": labels,
        "oracle": oracle,
        "n_outcome": np.array([len(r.labels) for r in recs], dtype=np.int32),
        "prompt": np.array([tq.context_text for tq in tqs], dtype=object),
        "episode": np.array([r.episode for r in recs], dtype=np.int32),
        "turn": np.array([r.turn for r in recs], dtype=np.int32),
        "rotation": np.array([r.rotation for r in recs], dtype=np.int32),
        "probe": np.array([r.probe for r in recs], dtype=object),
        "kind": np.array([r.kind for r in recs], dtype=object),
        "env": np.array([env_name] * n, dtype=object),
        "delivery": np.array([r.delivery for r in recs], dtype=object),
        **({"belief_state": _state_rows(recs, sizes.state)} if sizes.state else {}),
    }


def _state_rows(recs: Sequence[QueryRecord], n_state: int) -> np.ndarray:
    """The ``belief_state`` rows of ``recs`` (NaN where a read-out has none)."""
    out = np.full((len(recs), n_state), np.nan)
    for i, r in enumerate(recs):
        if r.state is not None:
            out[i, : len(r.state)] = r.state
    return out


def state_labels(recs: Sequence[QueryRecord]) -> tuple[str, ...]:
    """The hidden-state labels of a study's read-outs (``()`` when none has a state); read-outs
    with different labels are one line (:class:`ParameterError`)."""
    found = {r.state_labels for r in recs if r.state is not None}
    if len(found) > 1:
        raise ParameterError("the read-outs' hidden-state beliefs have different state labels")
    return found.pop() if found else ()


def check_formats(recs: Sequence[QueryRecord], model: LoadedModel, env_name: str) -> None:
    """A text environment asked of a toy model (a vocabulary of symbols, no chat template) is
    one line (:class:`ParameterError`); a token-level one on a text model is checked token by
    token when rendered (:func:`belieflens.readouts.render.symbol_ids`)."""
    if model.info.source == "toy" and any(r.query.format != "tokens" for r in recs):
        raise ParameterError(
            f"environment {env_name!r} is a text environment, but model {model.info.spec!r} is "
            "a toy over a process's symbols (no chat template): use a token-level environment "
            "(`belieflens envs` lists them)"
        )


def _query_rows(recs: Sequence[QueryRecord], tqs: Sequence[TokenizedQuery]) -> Iterator[list[Any]]:
    for r, tq in zip(recs, tqs, strict=True):
        yield [r.episode, r.turn, r.probe, r.kind, r.delivery, r.rotation, list(r.labels),
               None if r.oracle is None else [float(x) for x in r.oracle],
               {k: r.truth[k] for k in sorted(r.truth)},
               list(tq.context_ids), [list(c) for c in tq.option_ids], list(tq.outcome),
               tq.context_text, *([] if r.state is None else [[float(x) for x in r.state]])]


@dataclass(frozen=True)
class Prepared:
    """A study rendered and sized, before any forward: what :func:`write_rows` writes from.

    Everything here depends only on the environment, the tokenizer and the options, so every
    shard of a study directory prepares the same whole study (:mod:`belieflens.run.shards`).
    """

    recs: list[QueryRecord]
    tqs: list[TokenizedQuery]
    lens_ids: list[int]
    sizes: Sizes
    """Sizes of the whole study (``query`` = every read-out)."""
    study: Study
    """The whole study (no ``rows``)."""
    max_rows: int
    max_tokens: int
    env_name: str
    env_params: dict[str, Any]
    reuse: bool
    retain_bytes: int
    """What the radix tree's retained key/value caches may hold (:func:`plan_memory`)."""
    held_rows: int
    """Read-outs held in memory before they are written (:func:`plan_memory`)."""
    text_ids: list[int]
    """Every id of the study's contexts and options, ascending."""
    texts: list[str]
    """Each of ``text_ids`` decoded alone (the file's ``token_text``)."""


def _check_context(tqs: Sequence[TokenizedQuery], model: LoadedModel) -> None:
    """A toy's read-outs must fit its context (a toy has as many positions as it was trained
    on); a longer one is one line (:class:`ParameterError`)."""
    n_ctx = int(getattr(model.bridge.cfg, "n_ctx", 0) or 0)
    longest = max(len(tq.context_ids) for tq in tqs)
    if model.info.source == "toy" and 0 < n_ctx < longest:
        raise ParameterError(
            f"the read-outs need {longest} positions but model {model.info.spec!r} has "
            f"{n_ctx}: ask for sequences of at most {n_ctx - 1} tokens (--set length=...)"
        )


def prepare(env: Environment, model: LoadedModel, options: ExtractOptions) -> Prepared:
    """Render every read-out of the study and size its file (no forward runs)."""
    recs = list(records(env, options.episodes, options.seed))
    if not recs:
        raise ParameterError("the environment produced no read-outs for these parameters")
    env_name = getattr(env, "name", type(env).__name__)
    check_formats(recs, model, env_name)
    labels = state_labels(recs)
    bos = bos_policy(model.tokenizer)
    tqs = [render(model.tokenizer, r.query, bos=bos) for r in recs]
    _check_context(tqs, model)
    lens_ids = sorted({t for tq in tqs for cont in tq.option_ids for t in cont})
    text_ids = sorted(set(lens_ids).union(*(tq.context_ids for tq in tqs)))
    sizes = Sizes(
        query=len(recs),
        layer=model.info.n_layers + 1,
        d_model=model.info.d_model,
        token=max(len(tq.context_ids) for tq in tqs),
        option=max(len(tq.option_ids) for tq in tqs),
        cont_token=max(len(c) for tq in tqs for c in tq.option_ids),
        outcome=max(len(r.labels) for r in recs),
        lens_token=len(lens_ids),
        vocab=model.info.vocab_size if options.save_logits else 0,
        cont_extra=(
            max(len(c) for tq in tqs for c in tq.option_ids) - 1 if options.cont_resid else 0
        ),
        text_token=len(text_ids),
        state=len(labels),
    )
    reuse = options.reuse_prefix and model.info.prefix_reuse
    max_rows, max_tokens, memory = _batches(model, options, sizes, runner_attention(model, reuse))
    env_params = dataclasses.asdict(env.params)
    the_study = Study(
        env_name=env_name, env_params=env_params, seed=options.seed, episodes=options.episodes,
        model=StudyModel.of(model.info),
        options=StudyOptions(
            window=options.window, max_rows=options.max_rows, max_tokens=options.max_tokens,
            row_tokens=options.row_tokens,
            padding_side=options.padding_side, resid_dtype=options.resid_dtype,
            save_logits=options.save_logits, prefix_reuse=reuse, cont_resid=options.cont_resid,
        ),
        sizes=sizes, queries_sha256=queries_hash(_query_rows(recs, tqs)),
    )
    return Prepared(recs=recs, tqs=tqs, lens_ids=lens_ids, sizes=sizes, study=the_study,
                    text_ids=text_ids, texts=token_texts(model.tokenizer, text_ids),
                    max_rows=max_rows, max_tokens=max_tokens, env_name=env_name,
                    env_params=env_params, reuse=reuse, retain_bytes=memory.retained_bytes,
                    held_rows=memory.held_rows)


def readout_bytes(sizes: Sizes) -> int:
    """Bytes one read-out's values take while its window is held: twice what is stored (the
    runner's copy and the stacked window's)."""
    values = sizes.layer * sizes.d_model * (1 + sizes.option * sizes.cont_extra)
    return 2 * 4 * (values + sizes.vocab + 2 * sizes.option + 1)


def _batches(model: LoadedModel, options: ExtractOptions, sizes: Sizes,
             attention: AttentionName) -> tuple[int, int, MemoryPlan]:
    """Rows and padded tokens per forward call, and the memory plan they fit: ``--batch-size
    auto`` and ``--max-memory`` (default a quarter of the machine's memory) applied, for
    forward calls attending as ``attention`` does."""
    budget = options.max_memory or default_memory(model.info.device)
    longest = sizes.token + sizes.cont_token
    max_rows, max_tokens = options.max_rows, options.max_tokens
    if max_rows == 0:
        auto = auto_budget(model, longest, budget=budget, attention=attention)
        max_rows, max_tokens = auto.max_rows, auto.max_tokens
    plan = plan_memory(model, budget, longest=longest, max_tokens=max_tokens,
                       window=min(options.window, sizes.query),
                       readout_bytes=readout_bytes(sizes), attention=attention)
    return max_rows, plan.max_tokens, plan


def check_rows(rows: tuple[int, int], n: int, window: int) -> None:
    """``rows`` is a shard's range of a study of ``n`` read-outs: non-empty, inside, and cut
    at window boundaries (else :class:`ParameterError`)."""
    lo, hi = rows
    if not (0 <= lo < hi <= n) or lo % window or (hi % window and hi != n):
        raise ParameterError(
            f"rows [{lo}, {hi}) are not a run of whole {window}-query windows of {n} read-outs"
        )


def write_rows(
    env: Environment,
    model: LoadedModel,
    out: Path,
    options: ExtractOptions,
    prepared: Prepared,
    *,
    stop: Stop,
    on_progress: Callable[[Progress], None] | None = None,
    extra_attrs: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    rows: tuple[int, int] | None = None,
    checkpoint_seconds: float = CHECKPOINT_SECONDS,
) -> Path:
    """Run the read-outs of the ``prepared`` study of ``env`` and write ``out``; returns its
    path. The caller holds ``out``'s write lock and the run's ``stop``
    (:class:`belieflens.run.lifecycle.Extraction` in one process; a shard task on a worker).

    The file is allocated with every static value (after checking its filesystem has room:
    else one line, nothing written), then the model runs window by window, batch by batch;
    finished read-outs are committed at batch boundaries at least every
    ``checkpoint_seconds`` and at each window's end (:mod:`belieflens.run.checkpoint`). If
    ``<out>.partial`` holds an interrupted run of the same study, only its rows not marked
    complete run (see :mod:`belieflens.run.resume`); a partial file of another study raises
    :class:`~belieflens.errors.CacheFileError` unless ``overwrite``. A signal finishes the
    batch, saves and raises :class:`~belieflens.errors.InterruptedRunError`; no space left or
    an I/O error keep the partial file and raise :class:`~belieflens.errors.StorageError`
    (one line each).

    ``rows`` writes only the query rows ``[start, stop)`` of the study, a run of whole
    windows: a shard of a study directory (:mod:`belieflens.run.shards`). The shard is
    sized, batched and windowed exactly as the whole file, so the shards concatenated along
    ``query`` equal the file of one process bit for bit.
    """
    p, partial = prepared, partial_path(out)
    lo, hi = (0, len(p.recs)) if rows is None else rows
    if rows is not None:
        check_rows(rows, len(p.recs), options.window)
    the_study = p.study if rows is None else dataclasses.replace(p.study, rows=(lo, hi))
    wins = [(a - lo, b - lo) for a, b in resume.windows(len(p.recs), options.window)
            if lo <= a < hi]
    try:
        state = resume.resumable(partial, the_study, overwrite=overwrite)
        if state is None:
            _allocate(out, env, model, options, p, the_study, (lo, hi), extra_attrs)
    except InterruptedRunError as e:
        raise stopped_before(e, partial) from None
    saver = Saver(PartialFile(partial),
                  np.zeros(hi - lo, bool) if state is None else state.complete,
                  seconds=checkpoint_seconds, stop=stop,
                  stack=lambda outs: _model_rows(outs, p.sizes, options.save_logits),
                  max_pending=p.held_rows)
    progress = _Counter(on_progress, hi - lo, saver.saved)
    with saver.faults(partial):
        for start, stop_at in wins:
            saved = saver.window(start, stop_at)
            if saved is not None:
                _run_window(model, p, options, p.tqs[lo + start:lo + stop_at], saved,
                            progress, saver)
                release_freed_memory()
        return saver.writer.finish(out)


class _Counter:
    """Progress of one extraction: read-outs done (resumed ones counted), tokens, time."""

    def __init__(self, on_progress: Callable[[Progress], None] | None, total: int,
                 resumed: int) -> None:
        self.on_progress, self.total, self.resumed = on_progress, total, resumed
        self.tokens, self.t0 = 0, time.perf_counter()
        self.report(resumed, started=True)

    def report(self, done: int, *, started: bool = False) -> None:
        """Report ``done`` read-outs (at the start: the resumed ones, no time yet)."""
        if self.on_progress is not None:
            elapsed = 0.0 if started else time.perf_counter() - self.t0
            self.on_progress(Progress(done, self.total, self.tokens, elapsed,
                                      resumed=self.resumed))


def _allocate(out: Path, env: Environment, model: LoadedModel, options: ExtractOptions,
              p: Prepared, the_study: Study, rows: tuple[int, int],
              extra_attrs: Mapping[str, Any] | None) -> None:
    """Create ``out``'s partial file: provenance, the lens's head, and every static row (its
    size checked against the free space first: the text is rendered once to measure it)."""
    import torch

    lo, hi = rows
    attrs = provenance(
        model.info, env=p.env_name, env_params=p.env_params, seed=options.seed,
        episodes=options.episodes, threads=torch.get_num_threads(),
        extra={"padding_side": options.padding_side,
               "resid_dtype": options.resid_dtype,
               "save_logits": options.save_logits, "prefix_reuse": p.reuse,
               "extract_options": dataclasses.asdict(options),
               **(extra_attrs or {})},
    )
    norm = final_norm(model.bridge)
    unemb = unembedding(model.bridge, np.array(p.lens_ids, dtype=np.int64))
    attrs.update({"final_norm_kind": norm.kind, "final_norm_eps": norm.eps,
                  STUDY_ATTR: the_study.to_json(),
                  FINGERPRINT_ATTR: the_study.fingerprint()})
    recs, tqs = p.recs, p.tqs
    lens_index = {t: i for i, t in enumerate(p.lens_ids)}
    tschema = truth_schema(recs)
    gcolumns, gvalues = log_columns(env, [r.episode for r in recs])
    gschema = [VarSpec.parse(name, *spec) for name, spec in gcolumns.items()]

    def slabs() -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        for start, stop in resume.windows(hi - lo, max(options.window, 1024)):
            a, b = lo + start, lo + stop
            values = _static_rows(recs[a:b], tqs[a:b], p.sizes, lens_index, p.env_name)
            values.update(_truth_rows(recs[a:b], tschema))
            values.update({k: v[a:b] for k, v in gvalues.items()})
            yield start, values

    sizes, extra = dataclasses.replace(p.sizes, query=hi - lo), (*tschema, *gschema)
    text = text_bytes(p.texts) + sum(text_bytes(v.ravel()) for _, values in slabs()
                                     for v in values.values() if v.dtype == object)
    create_partial(
        out, sizes, attrs,
        static={
            "lens_token_id": unemb.token_ids.astype(np.int32),
            "unembed": unemb.weight.astype(np.float32),
            "unembed_bias": unemb.bias.astype(np.float32),
            "final_norm_gain": norm.gain,
            "final_norm_bias": norm.bias,
            "token_text_id": np.array(p.text_ids, dtype=np.int32),
            "token_text": np.array(p.texts, dtype=object),
            **({"state_label": np.array(state_labels(recs), dtype=object)}
               if p.sizes.state else {}),
        },
        row_slabs=slabs(), resid_dtype=options.resid_dtype,
        rows_per_chunk=chunk_rows(options.window), extra=extra,
        needed=allocation_bytes(sizes, resid_dtype=options.resid_dtype, extra=extra, text=text,
                                rows_per_chunk=chunk_rows(options.window)),
    )


def _run_window(model: LoadedModel, p: Prepared, options: ExtractOptions,
                w_tqs: Sequence[TokenizedQuery], saved: set[int], progress: _Counter,
                saver: Saver) -> None:
    """Compute one window's read-outs but those ``saved`` already, handing each batch's to
    ``saver`` (which commits them at batch boundaries and at the window's end)."""
    for batch, outs, n_tok in runner.run_queries(
        model, w_tqs, max_rows=p.max_rows, max_tokens=p.max_tokens,
        row_tokens=options.row_tokens,
        save_logits=options.save_logits, padding_side=options.padding_side,
        reuse_prefix=options.reuse_prefix, cont_resid=options.cont_resid, skip=saved,
        retain_bytes=p.retain_bytes,
    ):
        saver.add(batch, outs)
        progress.tokens += n_tok
        progress.report(saver.done)
        saver.batch_done()
    saver.commit()


def _model_rows(done: Sequence[runner.ReadOut], sizes: Sizes,
                save_logits: bool) -> dict[str, np.ndarray]:
    """Stack a window's read-outs into its model variables, padded to the file's sizes."""
    n = len(done)
    values: dict[str, np.ndarray] = {
        "resid": np.stack([r.resid for r in done]),
        "option_logprob": np.full((n, sizes.option), np.nan),
        "answer_lse": np.array([r.answer_lse for r in done]),
    }
    for i, r in enumerate(done):
        values["option_logprob"][i, : len(r.option_logprob)] = r.option_logprob
    if sizes.cont_extra > 0:
        cr = np.full((n, sizes.option, sizes.cont_extra, sizes.layer, sizes.d_model), np.nan,
                     dtype=np.float32)
        for i, r in enumerate(done):
            if r.cont_resid is not None:
                o, e = r.cont_resid.shape[:2]
                cr[i, :o, :e] = r.cont_resid
        values["cont_resid"] = cr
    if save_logits:
        values["logprobs"] = np.stack([np.asarray(r.logprobs, dtype=np.float32) for r in done])
    return values
