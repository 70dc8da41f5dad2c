"""Cache: model loading, batched read-outs through the TransformerLens bridge, HDF5 store."""

from belieflens.cache.store import SCHEMA_VERSION, open_cache

__all__ = ["SCHEMA_VERSION", "open_cache"]
