"""Diagnostics that need torch, run by the agent as subprocesses (the agent never imports torch)."""
