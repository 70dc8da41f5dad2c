"""Training on a loaded model: the tuned lens (:mod:`.lens`, with its data in
:mod:`.lens_data`); and small models of belieflens's own, toy transformers on token-level
processes (:mod:`.toy`)."""
