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


class StorageError(BeliefLensError):
    """A filesystem has no room for a write, or failed one (no space left, an I/O error).

    Its line names the filesystem and what was kept: a write checked beforehand wrote nothing;
    an extraction keeps its partial file and the read-outs marked complete in it, and a
    rerun resumes. The CLI exits with code 2, as for any :class:`BeliefLensError`.
    """


class InterruptedRunError(BeliefLensError):
    """SIGINT or SIGTERM stopped a run, after what was complete had been saved.

    The line says what was saved and how to go on; the CLI prints it as
    ``interrupted: <message>`` and exits with ``128 + signal`` (130 for SIGINT, 143 for
    SIGTERM), the shell's code for a process a signal stopped.
    """

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum

    def __reduce__(self) -> tuple[type[InterruptedRunError], tuple[str, int]]:
        """Pickled with its signal (a Dask task's error crosses processes)."""
        return type(self), (str(self), self.signum)

    @property
    def exit_code(self) -> int:
        """``128 + signal``: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


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
