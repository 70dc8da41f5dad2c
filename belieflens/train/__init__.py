"""Training on a loaded model: the tuned lens (:mod:`.lens`, with its data in
:mod:`.lens_data`)."""
