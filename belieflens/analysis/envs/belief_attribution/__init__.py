"""Belief-attribution analysis: revision and attribution scores, and the report section."""
