"""ProteinWorld analysis: the report section (posterior tracking per experiment step)."""
