"""Recommender analysis: scores against the exact posterior, and the report section."""
