"""What other components may take from the nodes component: nothing to ask, only the refusal its routes raise.
Its routes take ``NodeKeys`` (``api.py``)."""

from __future__ import annotations

from myolo.coordinator.core.errors import NotFound


class NotEnrolled(NotFound):
    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        hint = f"enrol it with PUT /v1/nodes/{node_id}/key"
        super().__init__(f"node {node_id!r} has no enrolled key", field="node_id", hint=hint)
