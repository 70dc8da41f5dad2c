"""Dutch-book analysis: Yes/No credences, sure-loss constructions, the arbitrage finder,
and the report section."""
