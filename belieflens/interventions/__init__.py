"""Causal tests of where a belief lives (interchange patching, steering, erasure)."""
