"""The lens interface: one way to read a layer's residual through the model's head.

:class:`Lens` is the Protocol every lens implements (after tuned-lens): ``transform`` maps
every layer's residual into the final layer's space, and the model's
:class:`~belieflens.lens.head.Head` (the final norm, then the unembedding) turns the result
into logits. :class:`LogitLens` is the identity; :class:`~belieflens.lens.tuned.TunedLens`
applies trained per-layer translators. Nothing here needs a model: a cache file stores the
head (:meth:`~.head.Head.from_dataset`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import xarray as xr


@runtime_checkable
class Lens(Protocol):
    """A way to read a layer's residual through the model's head (after tuned-lens).

    ``transform`` maps residuals ``[..., layer, d_model]`` (numpy float64 or torch) to
    residuals of the same shape in the final layer's space; the lens's logits are then
    :meth:`belieflens.lens.head.Head.logits` of the result. ``name`` is the lens's
    ``source`` in :func:`belieflens.analysis.summary.summary` (``logit-lens``,
    ``tuned-lens``); ``check_file`` raises if the lens does not fit a cache file's model.
    """

    @property
    def name(self) -> str:
        """The lens's name as a ``source`` value."""
        ...

    def transform(self, resid: Any) -> Any:
        """Translate every layer's residual (the layer axis is second to last)."""
        ...

    def check_file(self, ds: xr.Dataset) -> None:
        """Raise unless the lens fits cache file ``ds``."""
        ...


class LogitLens:
    """The logit lens: every layer's residual read through the head unchanged."""

    @property
    def name(self) -> str:
        """``logit-lens``."""
        return "logit-lens"

    def transform(self, resid: Any) -> Any:
        """The identity."""
        return resid

    def check_file(self, ds: xr.Dataset) -> None:
        """Every cache file fits the logit lens."""

    def __repr__(self) -> str:
        return "LogitLens()"
