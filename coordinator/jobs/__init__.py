"""Elastic training jobs (issue 13): manifests today; the scheduling component next."""
