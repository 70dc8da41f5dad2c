"""The one way an intervention runs: :func:`intervene`.

Every intervention is an options record (:class:`~belieflens.interventions.patch.PatchOptions`,
:class:`~belieflens.interventions.steer.SteerOptions`,
:class:`~belieflens.interventions.erase.EraseOptions`) that knows the kind of result it writes,
the study variables it reads and, given a study and a :class:`Selection`, its :class:`Plan`.
:func:`intervene` does the rest, the same for each: the output and the study are checked, the
plan made (its inputs checked), the study's model loaded (other weights refused), the layers
checked against it, the plan computed with libraries quiet, and the result written with its
provenance.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypedDict

import xarray as xr

from belieflens.errors import choice
from belieflens.interventions.belief import BeliefReads, with_belief_reads
from belieflens.interventions.model import layer_list, model_for
from belieflens.interventions.readouts import Selection, StudyReadouts, check_model, read_study
from belieflens.interventions.results import check_out, provenance, write_result
from belieflens.model.load import LoadedModel, quiet_libraries
from belieflens.types import DEVICES, DeviceName

OnProgress = Callable[[int, int], None]
"""Called with (done, total) after each batch."""


@dataclass(frozen=True)
class Plan:
    """An intervention ready to run on a checked study: ``compute`` on the loaded model, the
    ``settings`` recorded as the result's ``option_*`` attributes, and ``belief_reads``, what
    it adds to its result on a study that holds beliefs
    (:func:`~belieflens.interventions.belief.with_belief_reads`; ``None``: nothing)."""

    settings: Mapping[str, Any]
    compute: Callable[[LoadedModel, OnProgress | None], xr.Dataset]
    belief_reads: BeliefReads | None = None


class Intervention(Protocol):
    """An intervention's options record."""

    kind: ClassVar[str]
    """The ``kind`` attribute of its result file (registered with its report:
    :class:`~belieflens.report.interventions.InterventionKind`)."""
    need: ClassVar[tuple[str, ...]]
    """Study variables it reads beyond :data:`~belieflens.interventions.readouts.NEEDED`."""

    @property
    def layers(self) -> tuple[int, ...] | None:
        """Layers it edits (``None``: all)."""
        ...

    def plan(self, study: StudyReadouts, select: Selection) -> Plan:
        """Its plan for the read-outs ``select`` names (one line if they cannot be used)."""
        ...


class RunKeywords(TypedDict, total=False):
    """The keywords of :func:`intervene` that :func:`belieflens.patch`,
    :func:`belieflens.steer` and :func:`belieflens.erase` pass on."""

    model: LoadedModel | str | None
    select: Selection | None
    overwrite: bool
    device: DeviceName
    on_progress: OnProgress | None


def intervene(
    study: str | os.PathLike[str],
    options: Intervention,
    *,
    out: str | os.PathLike[str],
    model: LoadedModel | str | None = None,
    select: Selection | None = None,
    overwrite: bool = False,
    device: DeviceName = "cpu",
    on_progress: OnProgress | None = None,
) -> Path:
    """Run the intervention ``options`` on a study's read-outs and write the result file ``out``.

    ``model``: the study's model, loaded or as a ``--model`` spec (``None``: the study's own
    ``model_spec``), loaded on ``device``; a model with other weights is refused. ``select``:
    the read-outs to run (default: all). Every input is checked before the model loads; bad
    input raises one line and writes nothing. ``on_progress(done, total)`` after each batch.
    """
    device = choice("--device", device, DEVICES)
    path = Path(out)
    check_out(path, overwrite)
    st = read_study(Path(study), need=options.need)
    plan = options.plan(st, select or Selection())
    loaded = model_for(model, st, device=device)
    check_model(st, loaded)
    layer_list(options.layers, loaded.info.n_layers)
    with quiet_libraries():
        ds = with_belief_reads(plan.compute(loaded, on_progress), st, plan.belief_reads)
    ds.attrs.update(provenance(options.kind, st, loaded, plan.settings))
    return write_result(ds, path)
