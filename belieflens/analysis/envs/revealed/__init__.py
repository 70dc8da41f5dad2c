"""Revealed belief vs stated answer: analysis of the dice, coins, preference, choice and
case-study environments (Mondal et al., "Do Large Language Models Exhibit Cognitive
Dissonance?").

- :mod:`.readouts`: a cache file's two read-outs of every grid point, paired by episode.
- :mod:`.metrics`: pure metrics on xarray (distances to the truth, accuracies, bias).
- :mod:`.summary`: metrics grouped by variant, with tests, on named dims.
- :mod:`.render`: text and Markdown tables, and the figures.
- :mod:`.section`: the ``belieflens analyze`` section the five environments declare.
"""

from belieflens.analysis.envs.revealed.metrics import (
    DEFAULT_EPS,
    distances,
    first_option_mass,
    revealed_correct,
    stated_correct,
    unique_mode,
)
from belieflens.analysis.envs.revealed.readouts import Readouts, readouts
from belieflens.analysis.envs.revealed.summary import VARIANT, Summary, summarise

__all__ = [
    "DEFAULT_EPS",
    "VARIANT",
    "Readouts",
    "Summary",
    "distances",
    "first_option_mass",
    "readouts",
    "revealed_correct",
    "stated_correct",
    "summarise",
    "unique_mode",
]
