"""The coordinator's HTTP API: fleet reads on every coordinator, cordon/uncordon on the leader."""

from coordinator.api.app import create_app, openapi_document, serve
from coordinator.api.service import FleetService, LeaderView, NotLeader, UnknownNode

__all__ = ["FleetService", "LeaderView", "NotLeader", "UnknownNode", "create_app", "openapi_document", "serve"]
