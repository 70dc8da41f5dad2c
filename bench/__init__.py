"""belieflens's benchmarks: one script per question (``bench/README.md``), their shared
helpers in :mod:`bench._lib`. Run one as ``.venv/bin/python -m bench.NAME`` from the
repository root."""
