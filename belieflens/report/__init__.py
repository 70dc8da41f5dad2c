"""Presentation: tables, figures and Markdown from computed xarray results.

Computation lives below, in :mod:`belieflens.analysis` (every public function returns a
``Dataset``, ``DataArray`` or ``DataTree`` with named dimensions); this layer prints, plots
and writes it, and nothing here computes a statistic of its own.

- :mod:`.tables`: plain-text tables and the shared number formats (:func:`~.tables.pm`);
- :mod:`.figures`: the one matplotlib entry point (:func:`~.figures.pyplot`,
  :func:`~.figures.save`) and the study's figures;
- :mod:`.section`: an environment's report section (:class:`~.section.Section`) and the
  signature of the functions, owned by each environment, that make one;
- :mod:`.analysis`: ``belieflens analyze`` of a study; :mod:`.compare`: of several models;
  :mod:`.interventions`: of an intervention result file;
- :mod:`.viewer`: the interactive page each of them writes (``study.html``,
  ``compare.html``, ``intervention.html``), its script and style in ``belieflens/data/viewer/``.
"""
