"""Elastic training jobs (issue 13): manifests and placement today; the scheduling component next."""
