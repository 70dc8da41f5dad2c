"""belieflens: what a language model believes, turn by turn and layer by layer.

Public entry points: :mod:`belieflens.envs`, :mod:`belieflens.probes`,
:mod:`belieflens.cache` and :mod:`belieflens.analysis`; :func:`open_cache`
opens a cache file as an ``xarray.Dataset``.
"""

from belieflens.cache.store import open_cache
from belieflens.errors import BeliefLensError

__version__ = "0.1.0"

__all__ = ["BeliefLensError", "__version__", "open_cache"]
