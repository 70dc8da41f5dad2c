"""Token alignment on the embedded model's tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from belieflens.episodes.base import Message, Query
from belieflens.episodes.questions import mcq_probe
from belieflens.readouts.render import bos_policy, disambiguate, render

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def _text(tok: PreTrainedTokenizerBase, ids: Sequence[int]) -> str:
    """The text of token ids (``decode`` of a flat id list is one string)."""
    text = tok.decode(list(ids))
    assert isinstance(text, str)
    return text


def _raw(prompt: str, options: tuple[str, ...], terminator: str = "\n") -> Query:
    return Query((), prompt, options, tuple(range(len(options))), format="raw",
                 terminator=terminator)


def test_digits_split_as_space_then_digit_moves_space_into_context(
    smol_tokenizer: PreTrainedTokenizerBase
) -> None:
    tok = smol_tokenizer
    assert tok(" 1", add_special_tokens=False)["input_ids"] == [216, 33]
    tq = render(tok, _raw("The die shows", (" 1", " 2", " 3")))
    assert tq.context_ids[-1] == 216  # the shared " " is context
    assert tq.option_ids == ((33,), (34,), (35,))
    assert tq.single_token
    assert _text(tok, tq.context_ids) == "The die shows "


def test_trailing_space_in_context_merges_into_option_token(
    smol_tokenizer: PreTrainedTokenizerBase
) -> None:
    tok = smol_tokenizer
    a = render(tok, _raw("Answer:", (" A", " B")))
    b = render(tok, _raw("Answer: ", ("A", "B")))
    assert a.option_ids == ((330,), (389,))  # " A", " B"
    assert tok("A", add_special_tokens=False)["input_ids"] != [330]  # "A" differs from " A"
    # Tokenised alone, "Answer: " ends in a space token; jointly the space belongs to " A".
    alone = tok("Answer: ", add_special_tokens=False)["input_ids"]
    assert tuple(alone) != b.context_ids
    assert b.context_ids == a.context_ids and b.option_ids == a.option_ids
    for opt, ids in zip(("A", "B"), b.option_ids, strict=True):
        full = tok("Answer: " + opt, add_special_tokens=False)["input_ids"]
        assert list(b.context_ids) + list(ids) == full


def test_prefix_ambiguous_options_get_terminator(smol_tokenizer: PreTrainedTokenizerBase) -> None:
    assert disambiguate(["1", "12"], ".") == ("1.", "12.")
    assert disambiguate(["1", "2"], ".") == ("1", "2")
    tq = render(smol_tokenizer, _raw("Total:", (" 1", " 12", " 2"), terminator="."))
    assert all(len(c) >= 1 for c in tq.option_ids)
    decoded = [_text(smol_tokenizer, c) for c in tq.option_ids]
    assert decoded[0].endswith(".") and decoded[1].endswith(".")
    # no continuation is a prefix of another
    for i, a in enumerate(tq.option_ids):
        for j, b in enumerate(tq.option_ids):
            if i != j:
                assert tuple(b[: len(a)]) != a


def test_chat_template_bos_never_doubled(smol_tokenizer: PreTrainedTokenizerBase) -> None:
    tok = smol_tokenizer
    ctx = (Message("user", "Is the sky blue?"),)
    probe = mcq_probe("q", ctx, "Pick one.", ("yes", "no"), None, "single-turn")
    bos = bos_policy(tok)
    for q in probe.queries:
        tq = render(tok, q, bos=bos)
        start = tok.convert_tokens_to_ids("<|im_start|>")
        assert tq.context_ids[0] == start
        assert tq.context_ids[1] != start
        assert tq.context_text.endswith("assistant\nAnswer:")
        assert tq.option_ids == ((330,), (389,))


def test_forced_bos_prepended_once(smol_tokenizer: PreTrainedTokenizerBase) -> None:
    tq = render(smol_tokenizer, _raw("hello", (" A", " B")), bos=1)
    assert tq.context_ids[0] == 1 and tq.context_ids[1] != 1
    tq2 = render(smol_tokenizer, _raw("<|im_start|>hello", (" A", " B")), bos=1)
    assert tq2.context_ids[0] == 1 and tq2.context_ids[1] != 1


def test_identical_options_rejected() -> None:
    with pytest.raises(ValueError):
        Query((), "x", ("a", "a"), (0, 1), format="raw")


def test_each_token_carries_its_span(smol_tokenizer: PreTrainedTokenizerBase) -> None:
    """The renderer places each message's spans where the chat template put its content and
    reads them onto tokens: coin flip's flips are turn t's evidence, its counts a summary, the
    MCQ the question, everything else (chat template, intro, prefill) template."""
    import belieflens.envs as envs
    from belieflens.readouts.render import QUESTION, SUMMARY, TEMPLATE

    ep = next(envs.get("coin-flip", turns=3, delivery="single-turn").episodes(1, seed=0))
    q = ep.turns[3].probes[0].queries[1]
    tq = render(smol_tokenizer, q, bos=bos_policy(smol_tokenizer))
    assert len(tq.spans) == len(tq.context_ids)
    words = {code: _text(smol_tokenizer, [t for t, c in zip(tq.context_ids, tq.spans,
                                                           strict=True) if c == code])
             for code in set(tq.spans)}
    flips = ep.turns[3].messages["single-turn"][0].content.split("so far: ")[1].split(" (")[0]
    assert [words[t].strip() for t in (1, 2, 3)] == flips.split(", ")
    # ")." is one token: a token that covers marked and unmarked text takes the mark
    assert words[SUMMARY].strip() == "(3 flips so far: 2 heads, 1 tails)."
    assert words[QUESTION].startswith("What do you think the next flip will be?")
    assert words[QUESTION].rstrip().endswith("Answer with the letter only.")
    assert "I have a coin" in words[TEMPLATE] and words[TEMPLATE].rstrip().endswith("Answer:")
    assert set(tq.spans) == {TEMPLATE, QUESTION, SUMMARY, 1, 2, 3}


def test_token_level_queries_mark_each_symbol_as_its_turns_evidence() -> None:
    from belieflens.readouts.render import TEMPLATE, _render_tokens

    class Words:
        bos_token_id, unk_token_id = 0, 3

        def convert_tokens_to_ids(self, words: list[str]) -> list[int]:
            return [{"H": 1, "T": 2}.get(w, 3) for w in words]

    tq = _render_tokens(Words(), Query((), "H T T", ("H", "T"), (0, 1), format="tokens"))
    assert tq.context_ids == (0, 1, 2, 2) and tq.spans == (TEMPLATE, 1, 2, 3)
