"""The toolkit's own error type: anything a user can cause is raised as one of these.

:func:`choice` and :func:`at_least` are the checks options go through, so that every
option's one-line message has one wording."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar


class BeliefLensError(Exception):
    """A user-facing error: its message is one line that says what is wrong and what is allowed.

    The CLI prints it as ``error: <message>`` and exits with code 2; no traceback.

    Examples:
        >>> try:
        ...     belieflens.envs.get("coin-flip", turns=0)
        ... except belieflens.BeliefLensError as e:
        ...     print(e)
        parameter 'turns' = 0 is not allowed: an integer in 1..1000
    """


class ParameterError(BeliefLensError, ValueError):
    """An environment parameter or option has a value outside what is allowed."""


class ModelNotFoundError(BeliefLensError):
    """A ``--model`` value could not be resolved to weights on this machine."""


class CacheFileError(BeliefLensError):
    """A cache file is missing, corrupt, incomplete or of the wrong schema."""


class ImportFormatError(BeliefLensError):
    """An imported file (BayesBench JSON, user question set) is malformed."""


C = TypeVar("C", bound=str)


def choice(option: str, value: str, allowed: Sequence[C]) -> C:
    """``value`` as one of ``allowed`` (a ``Literal`` option set), else one line naming
    ``option`` (:class:`ParameterError`)."""
    for a in allowed:
        if a == value:
            return a
    raise ParameterError(
        f"option '{option}' = {value!r} is not allowed: one of {', '.join(allowed)}"
    )


def at_least(option: str, value: float, least: float, allowed: str = "") -> None:
    """Refuse ``value < least`` in one line naming ``option``; ``allowed`` says what is
    allowed (default ``>= least``)."""
    if value < least:
        raise ParameterError(
            f"option '{option}' = {value} is not allowed: {allowed or f'>= {least}'}"
        )
