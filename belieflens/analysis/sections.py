"""Environment-specific analysis sections appended to ``belieflens analyze``.

The generic analysis (beliefs per turn, logit lens per layer) runs on every
cache file. An environment that needs more (revealed vs stated answers, Dutch
books, attribution scores, ...) registers a :class:`SectionFn` here under its
name; ``analyze`` calls every section registered for the file's environment.
"""

from __future__ import annotations

import importlib
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
    """

    title: str
    text: str
    markdown: str
    files: tuple[Path, ...] = ()


class SectionFn(Protocol):
    """Computes one analysis section from an open cache file."""

    def __call__(
        self, ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod
    ) -> Section:
        """Analyse ``ds``; write PNGs into ``out_dir`` when it is not ``None``."""
        ...


# environment name -> ["module:function", ...]
_SECTIONS: dict[str, list[str]] = {
    "dutch-book": ["belieflens.analysis.coherence_section:dutch_book_section"],
    "protein-world": ["belieflens.analysis.protein_section:protein_world_section"],
    "belief-attribution": ["belieflens.analysis.attribution_section:belief_attribution_section"],
    "recommender": ["belieflens.analysis.recommender_section:recommender_section"],
    "social-judgment": ["belieflens.analysis.judgment_section:judgment_section"],
    "medical-triage": ["belieflens.analysis.judgment_section:judgment_section"],
    **{
        env: ["belieflens.analysis.revealed.section:revealed_section"]
        for env in ("dice", "coins", "preference", "choice", "case-study")
    },
}


def sections_for(env: str) -> list[SectionFn]:
    """The section functions registered for environment ``env`` (possibly none)."""
    out: list[SectionFn] = []
    for target in _SECTIONS.get(env, []):
        module, fn = target.split(":")
        out.append(getattr(importlib.import_module(module), fn))
    return out
