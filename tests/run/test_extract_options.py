"""``ExtractOptions``: every option checked in one place, one line naming its command-line
option; :meth:`ExtractOptions.of` reads the command line's names."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from belieflens.errors import ParameterError, at_least, choice
from belieflens.run.extract import ExtractOptions, max_rows


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"episodes": 0}, "option '--episodes' = 0 is not allowed: >= 1"),
        ({"seed": -1}, "option '--seed' = -1 is not allowed: >= 0"),
        ({"max_rows": -1}, "option '--batch-size' = -1 is not allowed: >= 1, or auto"),
        ({"max_tokens": 0}, "option '--max-tokens' = 0 is not allowed: >= 1"),
        ({"row_tokens": -1}, "option '--row-tokens' = -1 is not allowed: >= 0"),
        ({"window": 0}, "option '--window' = 0 is not allowed: >= 1"),
        ({"gen_batch": -1}, "option '--gen-batch' = -1 is not allowed: >= 1, or auto"),
        ({"threads": -2}, "option '--threads' = -2 is not allowed: >= 0"),
        ({"padding_side": "middle"},
         "option '--padding' = 'middle' is not allowed: one of left, right"),
        ({"resid_dtype": "int8"},
         "option '--resid-dtype' = 'int8' is not allowed: one of float32, float16"),
    ],
)
def test_each_bad_field_is_one_line(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ParameterError) as e:
        ExtractOptions(**fields)
    assert str(e.value) == message


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"batch_size": 0}, "option '--batch-size' = 0 is not allowed: >= 1, or auto"),
        ({"batch_size": "0"}, "option '--batch-size' = 0 is not allowed: >= 1, or auto"),
        ({"batch_size": "many"}, "option '--batch-size' = many is not allowed: >= 1, or auto"),
        ({"batch_size": True}, "option '--batch-size' = True is not allowed: >= 1, or auto"),
        ({"gen_batch": 0}, "option '--gen-batch' = 0 is not allowed: >= 1, or auto"),
        ({"gen_batch": "-4"}, "option '--gen-batch' = -4 is not allowed: >= 1, or auto"),
        ({"gen_batch": "2.5"}, "option '--gen-batch' = 2.5 is not allowed: >= 1, or auto"),
        ({"padding": "middle"}, "option '--padding' = 'middle' is not allowed: one of left, right"),
        ({"episodes": -2}, "option '--episodes' = -2 is not allowed: >= 1"),
    ],
)
def test_each_bad_keyword_is_one_line(keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(ParameterError) as e:
        ExtractOptions.of(**keywords)
    assert str(e.value) == message


def test_of_reads_the_command_line_names() -> None:
    assert ExtractOptions.of() == ExtractOptions()
    opts = ExtractOptions.of(episodes=2, batch_size="auto", padding="left", prefix_reuse=False,
                             resid_dtype="float16", window=8)
    assert opts == ExtractOptions(episodes=2, max_rows=0, padding_side="left",
                                  reuse_prefix=False, resid_dtype="float16", window=8)
    assert ExtractOptions.of(batch_size="12").max_rows == 12
    assert ExtractOptions.of(batch_size=5).max_rows == 5
    assert ExtractOptions.of(gen_batch="auto").gen_batch == 0 == ExtractOptions().gen_batch
    assert ExtractOptions.of(gen_batch="1").gen_batch == 1
    assert ExtractOptions.of(gen_batch=8).gen_batch == 8


def test_the_record_written_to_the_file_keeps_its_fields() -> None:
    """``extract_options`` in a cache file is ``asdict`` of the record: the same keys."""
    assert list(dataclasses.asdict(ExtractOptions())) == [
        "episodes", "seed", "max_rows", "max_tokens", "row_tokens", "save_logits",
        "padding_side", "resid_dtype", "window", "threads", "reuse_prefix", "cont_resid",
        "max_memory", "gen_batch",
    ]


def test_max_rows() -> None:
    assert max_rows("auto") == 0 and max_rows(" 3") == 3 and max_rows(16) == 16
    with pytest.raises(ParameterError, match="'--batch-size' = -3"):
        max_rows("-3")


def test_the_checks_themselves() -> None:
    assert choice("--x", "b", ("a", "b")) == "b"
    with pytest.raises(ParameterError, match=r"^option '--x' = 'c' is not allowed: one of a, b$"):
        choice("--x", "c", ("a", "b"))
    at_least("--n", 1, 1)
    with pytest.raises(ParameterError, match=r"^option '--n' = 0 is not allowed: >= 1$"):
        at_least("--n", 0, 1)
    with pytest.raises(ParameterError, match=r"^option '--n' = -1 is not allowed: >= 1, or 0$"):
        at_least("--n", -1, 0, ">= 1, or 0")
