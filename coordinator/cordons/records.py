"""Where the cordons component keeps its records: ``myolo.state.nodes`` (keyed by node id)."""

from __future__ import annotations

STATE_NODES = "myolo.state.nodes"
