"""ProteinWorld: identify a fictional protein class from a sequence of experiments.

:mod:`.env` defines the environment, :mod:`.world` the worlds and :mod:`.oracle` the exact
posterior and expected information gain; :mod:`.report` its analysis.
"""
