"""The coordinator's core: lifecycle, leadership and terms, state replay, ingest dispatch, ticks, the API.

Components (``coordinator/components.py``) do the work; see ``component.py`` for what one declares.
"""
