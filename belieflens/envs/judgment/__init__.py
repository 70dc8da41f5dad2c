"""Judgment environments (BayesBench Task 3): social judgment and medical triage.

:mod:`.env` defines both environments; :mod:`.case`, :mod:`.cases`, :mod:`.styles`,
:mod:`.task` and :mod:`.episode` their cases, simulated styles, questions and episodes;
:mod:`.metrics` and :mod:`.report` their analysis.
"""
