"""What other components may ask of the dashboard: nothing. It reads the others through their ``dashboard()``
declarations (``coordinator/core/dashboard.py``) and offers no interface of its own."""

from __future__ import annotations

__all__: list[str] = []
