"""Recommender environment (BayesBench Task 2): user types, rating tables, exact posteriors.

:mod:`.env` defines the environment; :mod:`.world`, :mod:`.synthetic`, :mod:`.bayesbench`,
:mod:`.shown` and :mod:`.bayes` its worlds and exact posteriors; :mod:`.metrics` and
:mod:`.report` its analysis.
"""
