"""Belief attribution: does the model give up an answer more readily when it is the user's?

:mod:`.env` defines the environment; :mod:`.questions` and :mod:`.generated` its question
sets; :mod:`.metrics` and :mod:`.report` its analysis.
"""
