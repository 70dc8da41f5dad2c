"""The ``belieflens analyze`` section of the revealed-belief environments.

Section ``revealed`` (:mod:`belieflens.analysis.sections`), declared by ``dice``, ``coins``,
``preference``, ``choice`` and ``case-study``.
"""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from belieflens.analysis.envs.revealed.readouts import readouts
from belieflens.analysis.envs.revealed.render import accuracy_bars, lens_plot, tables
from belieflens.analysis.envs.revealed.summary import summarise
from belieflens.analysis.envs.section import Section
from belieflens.types import DebiasMethod

GUIDE = """Every grid point is read out twice. The **revealed belief** (RevB) is the model's
distribution over the outcome continuations of a prompt that ends right before the
outcome; it is compared with the exact distribution (the truth) by Chebyshev distance,
L1 distance and symmetric KL (the truth smoothed additively so that outcomes it rules
out do not make the KL infinite). The **stated answer** (StaA) is the same scenario as
a question about one outcome's probability with five candidates (the paper's fractions
by default), debiased over their five rotations; it is right when its most likely
candidate is the correct one. With `stated=every` (the default) each possible outcome
gets its own question: StaA over every question is `staa_all`. Where the truth has a
unique mode, RevB is right when the revealed belief's argmax is that mode; it is paired
with the stated question about that mode (the grid point's first item) and the two
accuracies are compared on the same grid points with McNemar's exact test."""


def revealed_section(ds: xr.Dataset, out_dir: Path | None, *, method: DebiasMethod) -> Section:
    """Revealed belief vs stated answer: distance and accuracy tables, bias, lens, figures."""
    env = str(ds.attrs.get("env_name", ""))
    summary = summarise(readouts(ds, method=method))
    ts = tables(summary)
    text = "\n\n".join(t.text() for t in ts)
    files: list[Path] = []
    figures = ""
    if out_dir is not None:
        bars = accuracy_bars(summary, out_dir / "revealed_accuracy.png",
                             f"{env}: stated answer (StaA) vs revealed belief (RevB)")
        files.append(bars)
        figures += f"![StaA vs RevB]({bars.name})\n\n"
        lens = lens_plot(summary, out_dir / "revealed_lens.png",
                         f"{env}: revealed belief vs truth, and accuracy, by layer")
        if lens is not None:
            files.append(lens)
            figures += f"![by layer]({lens.name})\n\n"
    markdown = f"{GUIDE}\n\n{figures}" + "\n\n".join(t.markdown() for t in ts)
    return Section(title="Revealed belief vs stated answer", text=text, markdown=markdown,
                   files=tuple(files))
