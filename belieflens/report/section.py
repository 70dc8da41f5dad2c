"""One block of environment-specific ``belieflens analyze`` output, and the signature of the
functions that compute one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import xarray as xr

from belieflens.types import DebiasMethod


@dataclass(frozen=True)
class Section:
    """One block of analysis output.

    Attributes:
        title: heading in the report.
        text: plain-text tables for stdout.
        markdown: the report body (may embed PNGs written into the output folder by name).
        files: files written (PNGs), empty when no output folder was given.
        results: rows of the results table ``analyze --results`` writes (the columns of
            :data:`belieflens.report.floor.RESULT_COLUMNS`), for a comparison beside
            untrained controls; empty otherwise.
    """

    title: str
    text: str
    markdown: str
    files: tuple[Path, ...] = ()
    results: tuple[tuple[str, ...], ...] = ()


class SectionFn(Protocol):
    """Computes one analysis section from an open cache file."""

    def __call__(
        self, ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod
    ) -> Section:
        """Analyse ``ds``; write PNGs into ``out_dir`` when it is not ``None``."""
        ...
