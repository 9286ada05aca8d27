"""Errors the service raises to its callers (the HTTP API maps them to 307 redirects and 404s)."""

from __future__ import annotations


class NotLeader(Exception):
    """A write reached a coordinator that does not lead. ``leader_url`` is where to send it (None while no
    leader is known, e.g. during an election: retry shortly)."""

    def __init__(self, leader_url: str | None, leader_id: str | None = None) -> None:
        self.leader_url = leader_url
        self.leader_id = leader_id
        where = f"the leader {leader_id} at {leader_url}" if leader_url else "no leader is known yet; retry shortly"
        super().__init__(f"this coordinator does not lead; send writes to {where}")


class UnknownNode(LookupError):
    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        super().__init__(f"node {node_id!r} is not in the fleet view (check the name with `myoloctl get nodes`)")
