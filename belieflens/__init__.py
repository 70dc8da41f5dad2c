"""belieflens: what a language model believes, turn by turn and layer by layer.

One obvious way in, a study of one episode of one coin flip (the example below).

Examples:
    >>> import belieflens
    >>> model = belieflens.load("smollm2-135m")              # a TransformerLens bridge
    >>> path = belieflens.extract("coin-flip", params={"turns": 1}, model=model,
    ...                           out="first.h5", episodes=1, seed=0)
    >>> ds = belieflens.open_cache(path)                     # an xarray.Dataset
    >>> ds.bl.beliefs().dims                                 # analysis as methods of the Dataset
    ('delivery', 'probe', 'episode', 'turn', 'outcome')
    >>> tables = belieflens.analyze(path, decoders=False).text  # what `belieflens analyze` prints

The functions here are the facade :mod:`belieflens.api`, one for each command: :func:`load`,
:func:`models`, :func:`environments`, :func:`extract` (its options an :class:`ExtractOptions`
or keywords), :func:`merge`, :func:`open_cache`, :func:`info`, :func:`verify`,
:func:`analyze`, :func:`compare`, :func:`compare_report`, :func:`power`,
:func:`train_lens`, :func:`teach`, and the interventions :func:`patch`, :func:`steer`,
:func:`erase`, :func:`interchange` (options records :class:`PatchOptions`, :class:`SteerOptions`,
:class:`EraseOptions`, :class:`InterchangeOptions`; read-outs named by a :class:`Selection`).
``belieflens.envs.get(name, **params)`` builds an environment, and the subpackages
:mod:`belieflens.envs`, :mod:`belieflens.readouts`, :mod:`belieflens.run`,
:mod:`belieflens.store`, :mod:`belieflens.analysis`, :mod:`belieflens.interventions` and
:mod:`belieflens.lens` hold the parts. torch and transformers are imported only when a model
is loaded.
"""

import belieflens.analysis.accessor  # noqa: F401  (registers the ``ds.bl`` accessor)
from belieflens import envs
from belieflens.api import (
    EraseOptions,
    ExtractOptions,
    InterchangeOptions,
    LoadedModel,
    Pair,
    PatchOptions,
    Selection,
    SteerOptions,
    analyze,
    compare,
    compare_report,
    environments,
    erase,
    extract,
    gates,
    info,
    interchange,
    load,
    merge,
    models,
    open_cache,
    patch,
    power,
    steer,
    teach,
    train_lens,
    verify,
)
from belieflens.errors import BeliefLensError

__version__ = "0.1.0"

__all__ = [
    "BeliefLensError",
    "EraseOptions",
    "ExtractOptions",
    "InterchangeOptions",
    "LoadedModel",
    "Pair",
    "PatchOptions",
    "Selection",
    "SteerOptions",
    "__version__",
    "analyze",
    "compare",
    "compare_report",
    "environments",
    "envs",
    "erase",
    "extract",
    "gates",
    "info",
    "interchange",
    "load",
    "merge",
    "models",
    "open_cache",
    "patch",
    "power",
    "steer",
    "teach",
    "train_lens",
    "verify",
]
