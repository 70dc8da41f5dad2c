"""belieflens: what a language model believes, turn by turn and layer by layer.

One obvious way in::

    import belieflens

    model = belieflens.load("smollm2-135m")              # a TransformerLens bridge
    path = belieflens.extract("coin-flip", params={"turns": 10}, model=model,
                              out="study.h5", episodes=4, seed=0)
    ds = belieflens.open_cache(path)                     # an xarray.Dataset
    ds.bl.beliefs()                                      # analysis as methods of the Dataset

:func:`load`, :func:`extract`, :func:`train_lens` and :func:`compare` (several models on
one study) live in :mod:`belieflens.api`;
``belieflens.envs.get(name, **params)`` builds an environment, and the subpackages
:mod:`belieflens.envs`, :mod:`belieflens.readouts`, :mod:`belieflens.cache`,
:mod:`belieflens.analysis` and :mod:`belieflens.lens` hold the parts. torch and
transformers are imported only when a model is loaded.
"""

import belieflens.analysis.accessor  # noqa: F401  (registers the ``ds.bl`` accessor)
from belieflens import envs
from belieflens.api import analyze, compare, extract, load, train_lens
from belieflens.errors import BeliefLensError
from belieflens.model.load import LoadedModel
from belieflens.store.study import merge, open_cache

__version__ = "0.1.0"

__all__ = [
    "BeliefLensError",
    "LoadedModel",
    "__version__",
    "analyze",
    "compare",
    "envs",
    "extract",
    "load",
    "merge",
    "open_cache",
    "train_lens",
]
