"""Profiles of trainer workers on demand: py-spy on one worker, kept for the CLI to fetch."""
