"""The toolkit's own error type: anything a user can cause is raised as one of these."""

from __future__ import annotations


class BeliefLensError(Exception):
    """A user-facing error: its message is one line that says what is wrong and what is allowed.

    The CLI prints it as ``error: <message>`` and exits with code 2; no traceback.
    """


class ParameterError(BeliefLensError, ValueError):
    """An environment parameter or option has a value outside what is allowed."""


class ModelNotFoundError(BeliefLensError):
    """A ``--model`` value could not be resolved to weights on this machine."""


class CacheFileError(BeliefLensError):
    """A cache file is missing, corrupt, incomplete or of the wrong schema."""


class ImportFormatError(BeliefLensError):
    """An imported file (BayesBench JSON, user question set) is malformed."""
