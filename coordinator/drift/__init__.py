"""Drift detection: production traffic of a served model against the reference it was learned on."""
