"""The pre-upgrade checklist, run through the agents: ``POST /v1/preflight`` (see ``component.py``)."""
