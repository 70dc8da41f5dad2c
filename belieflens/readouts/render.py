"""Rendering queries to tokens with exact token alignment.

Rules (see DESIGN.md, "Correctness rules"):

1. The context text is the chat template applied to the messages with the
   generation prompt, followed by the assistant prefill (``format="chat"``), or
   the raw prompt (``format="raw"``).
2. **Prefix-ambiguous options.** If any option's text is a string prefix of
   another's (``"1"`` and ``"12"``), every option gets the query's
   ``terminator`` appended (``"1\\n"`` and ``"12\\n"``), so that each continuation
   says where it ends and none is contained in another.
3. **One tokenisation.** For each option the whole string ``context + option``
   is tokenised once. The context is the longest token prefix shared by all
   options' tokenisations: the split always falls where the joint tokenisation
   splits, and any token prefix shared by all options (e.g. the ``" "`` of
   ``" 1"``, ``" 2"``) moves into the context. Continuations are therefore never
   empty.
4. **BOS.** If the tokenizer prepends a BOS token by default and the rendered
   text does not already start with it, it is prepended once; never doubled.
5. **Spans.** Each context token carries the role of the text it covers
   (:attr:`TokenizedQuery.spans`): the evidence of turn ``t`` (code ``t``), a summary of the
   evidence (:data:`SUMMARY`), the question (:data:`QUESTION`), or the template
   (:data:`TEMPLATE`: the chat template, the environment's fixed wording, the prefill). The
   roles come from the messages' :class:`~belieflens.episodes.base.Span` records, placed in the
   rendered text where the template (or a ``raw`` prompt holding them) put each message's
   content, and read onto tokens through
   the tokenizer's character offsets (a tokenizer without offsets gives template
   everywhere). A token that covers marked and unmarked characters takes the mark. A
   ``tokens`` query's symbol ``i`` is the evidence of turn ``i``.
6. **Tokens.** A ``format="tokens"`` query (a token-level process) renders no text: each
   space-separated word of its prefill, and each option, is one vocabulary id
   (:func:`symbol_ids`), after the tokenizer's BOS (else its EOS). A vocabulary without
   one of the words is one line (:class:`BeliefLensError`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from belieflens.episodes.base import Query
from belieflens.errors import BeliefLensError

TEMPLATE, QUESTION, SUMMARY = -1, -2, -3
"""Span codes of context tokens that are not a turn's evidence (evidence of turn ``t``: ``t``)."""


@dataclass(frozen=True)
class TokenizedQuery:
    """A query aligned on tokens.

    Attributes:
        context_ids: the exact context fed to the model, BOS included where used.
        option_ids: each option's continuation tokens, in position order (never empty).
        outcome: outcome index shown at each position.
        context_text: the rendered context string (for inspection).
        spans: the role of each context token (rule 5: ``t`` for turn ``t``'s evidence,
            :data:`SUMMARY`, :data:`QUESTION`, :data:`TEMPLATE`); ``()`` when unknown.
    """

    context_ids: tuple[int, ...]
    option_ids: tuple[tuple[int, ...], ...]
    outcome: tuple[int, ...]
    context_text: str
    spans: tuple[int, ...] = ()

    @property
    def answer_pos(self) -> int:
        """Index in ``context_ids`` of the last context token, whose next token is read."""
        return len(self.context_ids) - 1

    @property
    def single_token(self) -> bool:
        """Whether every option is one token (one forward of the context reads them all)."""
        return all(len(o) == 1 for o in self.option_ids)


def context_text(tokenizer: Any, query: Query) -> str:
    """The context string of ``query`` under this tokenizer's chat template."""
    if query.format in ("raw", "tokens"):
        return query.prefill
    if getattr(tokenizer, "chat_template", None) is None:
        raise BeliefLensError(
            "this model's tokenizer has no chat template; use a raw-format environment or an "
            "instruct model"
        )
    messages = [{"role": m.role, "content": m.content} for m in query.messages]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return str(text) + query.prefill


def disambiguate(options: Sequence[str], terminator: str) -> tuple[str, ...]:
    """Apply rule 2: append ``terminator`` to all options if one is a prefix of another."""
    ambiguous = any(a != b and b.startswith(a) for a in options for b in options)
    return tuple(o + terminator for o in options) if ambiguous else tuple(options)


def bos_policy(tokenizer: Any) -> int | None:
    """The BOS id this tokenizer prepends by default, or ``None`` if it prepends none."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return None
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    return int(bos) if with_special and with_special[0] == bos else None


def _common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    n = min(len(s) for s in seqs)
    for i in range(n):
        t = seqs[0][i]
        if any(s[i] != t for s in seqs[1:]):
            return i
    return n


_INTS: dict[int, int] = {}


def _intern(token: int) -> int:
    """One shared int object per token id: a study holds millions of context ids, and a
    tokenizer returns a fresh 28-byte int for each, so interning leaves 8 bytes a token."""
    return _INTS.setdefault(token, token)


def symbol_ids(tokenizer: Any, words: Sequence[str]) -> list[int]:
    """The vocabulary id of each word, each one whole token (rule 5); a word the vocabulary
    does not hold is one line (:class:`BeliefLensError`)."""
    ids = tokenizer.convert_tokens_to_ids(list(words))
    unk = getattr(tokenizer, "unk_token_id", None)
    for word, i in zip(words, ids, strict=True):
        if i is None or (i == unk and word != getattr(tokenizer, "unk_token", None)):
            raise BeliefLensError(
                f"this model's vocabulary cannot hold the symbol {word!r} as one token: a "
                "token-level environment needs a model over its symbols (e.g. a toy model)"
            )
    return [int(i) for i in ids]


def start_id(tokenizer: Any) -> int:
    """The id a ``tokens`` query starts with: the tokenizer's BOS, else its EOS (rule 5)."""
    for name in ("bos_token_id", "eos_token_id"):
        i = getattr(tokenizer, name, None)
        if i is not None:
            return int(i)
    raise BeliefLensError("this model's tokenizer has neither a BOS nor an EOS token to start "
                          "a token-level sequence with")


def _render_tokens(tokenizer: Any, query: Query) -> TokenizedQuery:
    words = query.prefill.split()
    ids = symbol_ids(tokenizer, [*words, *query.options])
    return TokenizedQuery(
        context_ids=tuple(_intern(t) for t in (start_id(tokenizer), *ids[: len(words)])),
        option_ids=tuple((i,) for i in ids[len(words):]),
        outcome=query.outcome,
        context_text=query.prefill,
        spans=(TEMPLATE, *range(1, len(words) + 1)),
    )


def span_code(role: str, turn: int) -> int:
    """The code of a span's tokens (rule 5)."""
    if role == "evidence" and turn >= 1:
        return turn
    return QUESTION if role == "question" else SUMMARY


def char_codes(ctx: str, query: Query) -> list[int]:
    """The span code of every character of the rendered context ``ctx``: each message's
    content is found in ``ctx`` after the previous one's, and its spans are placed there (a
    ``raw`` prompt that holds its messages' contents, as a plain-text completion of the
    scenario does, is marked the same way)."""
    codes = [TEMPLATE] * len(ctx)
    if query.format == "tokens":
        return codes
    cursor = 0
    for m in query.messages:
        at = ctx.find(m.content, cursor) if m.content else -1
        shift = 0
        if at < 0 and m.content.strip():  # a template that trims the content
            at = ctx.find(m.content.strip(), cursor)
            shift = len(m.content) - len(m.content.lstrip())
        if at < 0:
            continue
        for sp in m.spans:
            code = span_code(sp.role, sp.turn)
            for c in range(max(at + sp.start - shift, at), min(at + sp.end - shift, len(ctx))):
                codes[c] = code
        cursor = at + len(m.content.strip() if shift else m.content)
    return codes


def token_codes(codes: Sequence[int], offsets: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """Each token's code from its characters' (rule 5: a marked character wins; of two marks,
    the one covering more characters)."""
    out = []
    for a, b in offsets:
        marks = [c for c in codes[a:b] if c != TEMPLATE]
        out.append(max(set(marks), key=marks.count) if marks else TEMPLATE)
    return tuple(out)


def render(tokenizer: Any, query: Query, *, bos: int | None = None) -> TokenizedQuery:
    """Render and align one query (rules in the module docstring).

    ``bos`` is the id to prepend (from :func:`bos_policy`), computed once per tokenizer.
    """
    if query.format == "tokens":
        return _render_tokens(tokenizer, query)
    ctx = context_text(tokenizer, query)
    options = disambiguate(query.options, query.terminator)
    seqs: list[list[int]] = []
    offsets: list[tuple[int, int]] | None = None
    fast = bool(getattr(tokenizer, "is_fast", False))
    for k, opt in enumerate(options):
        want = fast and k == 0  # the first option's offsets place the context's tokens
        enc = (tokenizer(ctx + opt, add_special_tokens=False, return_offsets_mapping=True)
               if want else tokenizer(ctx + opt, add_special_tokens=False))
        ids = list(enc["input_ids"])
        if want:
            offsets = [(int(a), int(b)) for a, b in enc["offset_mapping"]]
        if bos is not None and (not ids or ids[0] != bos):
            ids.insert(0, bos)
            if want and offsets is not None:
                offsets.insert(0, (0, 0))
        seqs.append(ids)
    n_ctx = _common_prefix(seqs)
    if n_ctx == 0:
        raise BeliefLensError("a query's options share no context tokens (empty prompt?)")
    conts = tuple(tuple(s[n_ctx:]) for s in seqs)
    if any(len(c) == 0 for c in conts):  # impossible after rule 2; kept as a guard
        raise BeliefLensError(f"empty continuation for options {options!r}")
    spans: tuple[int, ...] = ()
    if offsets is not None and len(offsets) == len(seqs[0]):
        spans = token_codes(char_codes(ctx, query), offsets[:n_ctx])
    return TokenizedQuery(
        context_ids=tuple(_intern(t) for t in seqs[0][:n_ctx]),
        option_ids=conts,
        outcome=query.outcome,
        context_text=ctx,
        spans=spans,
    )


def token_texts(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """Each id decoded alone (special tokens included), as a viewer shows a token."""
    return [str(tokenizer.decode([int(i)], skip_special_tokens=False)) for i in ids]


def prompt_key(text: str) -> str:
    """The key of a read-out's rendered context text (the ``prompt`` a cache file stores): the
    first 32 hex digits of its SHA-256. Teaching records the keys of every read-out it trained
    on, so that an evaluation can leave those read-outs out."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def chat_template_hash(tokenizer: Any) -> str:
    """SHA-256 of the tokenizer's chat template ('' if it has none), for provenance."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return ""
    return hashlib.sha256(str(template).encode()).hexdigest()
