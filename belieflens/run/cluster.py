"""Connecting to a Dask distributed cluster from a ``--cluster`` value.

``local`` or ``local:N`` starts a :class:`distributed.LocalCluster` of ``N`` worker
processes (default 2) with the machine's cores split between them; ``tcp://HOST:PORT``
(or any scheduler address Dask understands) connects to a running scheduler; a path to a
``scheduler.json`` file (``dask scheduler --scheduler-file``, dask-jobqueue) connects to
the scheduler it names. A scheduler that cannot be reached within ``timeout`` seconds gives
one line (:class:`ParameterError`). Nothing here schedules work: Dask does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from belieflens.errors import ParameterError


@runtime_checkable
class DaskClient(Protocol):
    """What sharded extraction uses of a :class:`distributed.Client` (any client will do)."""

    def submit(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Schedule ``func(*args)`` on the cluster; a future."""
        ...

    def scheduler_info(self, **kwargs: Any) -> dict[str, Any]:
        """The scheduler's description, with its ``workers``."""
        ...

    def cancel(self, futures: Any, **kwargs: Any) -> Any:
        """Cancel running or pending futures."""
        ...

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a scheduler before giving up."""


def local_workers(spec: str) -> int | None:
    """``N`` of ``local[:N]`` (``local`` alone: 2), or ``None`` when ``spec`` is not local."""
    if spec == "local":
        return 2
    if not spec.startswith("local:"):
        return None
    text = spec.split(":", 1)[1]
    if not text.isdigit() or int(text) < 1:
        raise ParameterError(
            f"option '--cluster' = {spec!r} is not allowed: local:N with N >= 1 workers"
        )
    return int(text)


def connect(spec: str, *, timeout: float = CONNECT_TIMEOUT) -> DaskClient:
    """A :class:`distributed.Client` for a ``--cluster`` value (see the module docstring).

    A local cluster is closed with the client (``client.close()`` then
    ``client.cluster.close()``, or use the client as a context manager).
    """
    try:
        import distributed
    except ImportError:  # pragma: no cover - a dependency
        raise ParameterError("--cluster needs dask distributed: pip install distributed") from None
    dd: Any = distributed  # its constructors are untyped
    n = local_workers(spec)
    if n is not None:
        cores = os.cpu_count() or 1
        cluster = dd.LocalCluster(n_workers=n, threads_per_worker=max(1, cores // n),
                               processes=True, dashboard_address=None)
        client: DaskClient = dd.Client(cluster)
        return client
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        if not path.is_file():
            raise ParameterError(f"option '--cluster' = {spec!r}: no such scheduler file")
        try:
            found: DaskClient = dd.Client(scheduler_file=str(path), timeout=timeout)
            return found
        except (OSError, TimeoutError, ValueError) as e:
            raise ParameterError(
                f"cannot reach the Dask scheduler named in {spec} within {timeout:g}s: "
                f"{_first_line(e)}"
            ) from None
    if "://" not in spec:
        raise ParameterError(
            f"option '--cluster' = {spec!r} is not allowed: local[:N], tcp://HOST:PORT or "
            "PATH/scheduler.json"
        )
    try:
        remote: DaskClient = dd.Client(spec, timeout=timeout)
        return remote
    except (OSError, TimeoutError, ValueError) as e:
        raise ParameterError(
            f"cannot reach the Dask scheduler at {spec} within {timeout:g}s: {_first_line(e)}"
        ) from None


def close(client: object) -> None:
    """Close ``client`` and, if it started one, its local cluster (the nanny's warnings
    about worker processes it has to kill on the way out are silenced)."""
    import logging

    c: Any = client
    cluster = c.cluster
    nanny = logging.getLogger("distributed.nanny")
    level = nanny.level
    nanny.setLevel(logging.ERROR)
    try:
        c.close()
        if cluster is not None:
            cluster.close()
    finally:
        nanny.setLevel(level)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
