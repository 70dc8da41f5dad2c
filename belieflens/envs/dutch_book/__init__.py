"""Dutch-book coherence: credences in related yes/no forecast questions.

:mod:`.env` defines the environment and :mod:`.scenarios` its scenarios; :mod:`.credence`,
:mod:`.coherence` (the sure-loss constructions) and :mod:`.report` its analysis.
"""
