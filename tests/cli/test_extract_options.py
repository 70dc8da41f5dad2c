"""``belieflens extract``'s options are the fields of the job's records, by name and default.

An extraction is one :class:`~belieflens.run.job.ExtractJob`: the study's options
(:class:`~belieflens.run.extract.ExtractOptions`, named on the command line as
:class:`~belieflens.run.extract.ExtractKeywords`), its :class:`~belieflens.run.job.Models`
and its :class:`~belieflens.run.job.Runtime`. Every field has a command-line option of the
same name with the same default, and every option is a field (or one of the few that are
not part of a job, :data:`NOT_FIELDS`), so a new option fails here until it is both.
:func:`belieflens.extract` takes the same names (``client`` for ``cluster``).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import typer

from belieflens import api
from belieflens.cli.main import app
from belieflens.run.extract import ExtractKeywords, ExtractOptions
from belieflens.run.job import Models, Runtime

NOT_FIELDS = {"env", "set_", "quiet"}
"""Options of ``extract`` that are not a record's field: the environment's name and
``--set`` (the job's built environment), and the progress bar."""

INVERTED = {"prefix_reuse": "no_prefix_reuse"}
"""Keywords whose option is their negation (``--no-prefix-reuse``)."""

API_NAMES = {"cluster": "client"}
"""Fields that :func:`belieflens.extract` takes under another name."""


def _options() -> dict[str, Any]:
    """The parameters of the ``extract`` command, by name."""
    group: Any = typer.main.get_command(app)
    return {str(p.name): p for p in group.commands["extract"].params}


def _record_fields() -> dict[str, Any]:
    """Every field of the records by its command-line name, with its default (``MISSING``:
    none)."""
    out: dict[str, Any] = dict.fromkeys(ExtractKeywords.__annotations__, dataclasses.MISSING)
    for record in (Models, Runtime):
        for f in dataclasses.fields(record):
            out[f.name] = f.default
    return out


def test_every_field_is_an_option_and_every_option_a_field() -> None:
    options = {INVERTED.get(k, k) for k in _record_fields()}
    assert set(_options()) - NOT_FIELDS == options


def test_the_options_defaults_are_the_records_defaults() -> None:
    cli = _options()
    keywords: dict[str, Any] = {k: cli[k].default for k in ExtractKeywords.__annotations__
                                if k not in INVERTED}
    keywords["prefix_reuse"] = not cli["no_prefix_reuse"].default
    assert ExtractOptions.of(**keywords) == ExtractOptions()
    for record in (Models, Runtime):
        for f in dataclasses.fields(record):
            if f.default is not dataclasses.MISSING:
                assert cli[f.name].default == (
                    str(f.default) if f.name == "init" else f.default), f.name


def test_the_api_takes_the_same_names_and_defaults() -> None:
    signature = inspect.signature(api.extract).parameters
    cli = _options()
    for name, default in _record_fields().items():
        if name in ExtractKeywords.__annotations__:
            continue  # the api's **keywords
        param = signature[API_NAMES.get(name, name)]
        if default is dataclasses.MISSING:  # out, model: the api's default is the option's
            expected = cli[name].default
            assert param.default in (inspect.Parameter.empty, expected), name
        else:
            assert param.default == (str(default) if name == "init" else default) or (
                name == "init" and param.default is None), name


def test_a_field_without_an_option_is_found(monkeypatch: Any) -> None:
    @dataclasses.dataclass(frozen=True)
    class Wider(Runtime):
        retries: int = 0

    monkeypatch.setattr(f"{__name__}.Runtime", Wider)
    options = {INVERTED.get(k, k) for k in _record_fields()}
    assert set(_options()) - NOT_FIELDS != options
    assert options - set(_options()) == {"retries"}
