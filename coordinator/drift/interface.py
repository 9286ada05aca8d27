"""What other components may ask of the drift component: nothing. Its routes take ``DriftAPI`` (``api.py``);
``DriftView``, the answer of ``GET /v1/drift/{model}``, is named here too for ``myoloctl``'s typed client."""

from __future__ import annotations

from myolo.coordinator.drift.answers import DriftView

__all__ = ["DriftView"]
