"""The model: resolving ``--model``, loading it as a TransformerLens bridge, and its fast paths.

- :mod:`.load`: names, paths and GGUF files to a :class:`~belieflens.model.load.LoadedModel`;
- :mod:`.kernels`: CPU linear kernels (oneDNN);
- :mod:`.attention`, :mod:`.norms`, :mod:`.patching`: the bridge's fused attention and plain
  norms inside extraction's forward calls;
- :mod:`.kv_cache`: prefix reuse through the bridge's key/value cache, with its fix and
  self-check.

torch and transformers are imported only when a model is loaded.
"""
