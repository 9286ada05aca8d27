"""The model registry: models, their numbered versions (with lineage and evaluations) and aliases (champion,
challenger, ...) with the full history of who moved them, when and why."""
