"""The environment contract: what every environment emits, and the parts they share.

An environment (:mod:`belieflens.envs`) emits :class:`Episode` objects of :class:`Turn`
objects, each carrying :class:`Probe` objects (belief questions with their exact oracle),
each asked as one :class:`Query` per Latin-square rotation. Everything here is plain text and
numbers: no tokenizer, no model.

- :mod:`.base`: the stage-boundary types and the :class:`Environment` Protocol;
- :mod:`.params`: typed parameter records, parsed from ``--set NAME=VALUE``;
- :mod:`.latin`: the Latin square of rotations and pooling (``debias``) over it;
- :mod:`.questions`: MCQ and completion probes;
- :mod:`.delivery`, :mod:`.generation`, :mod:`.capabilities`: how evidence reaches the
  model, generated text, and what an environment needs at run time;
- :mod:`.importing`: one-line validation of user data files.
"""

from belieflens.episodes.base import (
    Environment,
    Episode,
    Marked,
    Message,
    ParamsLike,
    Probe,
    Query,
    Span,
    Turn,
    marked,
)
from belieflens.episodes.latin import debias, latin_square
from belieflens.episodes.params import ParamSpec, param, parse, specs
from belieflens.episodes.questions import completion_probe, mcq_probe, mcq_text

__all__ = [
    "Environment",
    "Episode",
    "Marked",
    "Message",
    "ParamSpec",
    "ParamsLike",
    "Probe",
    "Query",
    "Span",
    "Turn",
    "completion_probe",
    "debias",
    "latin_square",
    "marked",
    "mcq_probe",
    "mcq_text",
    "param",
    "parse",
    "specs",
]
