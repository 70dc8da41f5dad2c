"""Social-judgment and medical-triage analysis: accuracy, invariance across styles,
engagement gaps, confusion matrices, and the report section."""
