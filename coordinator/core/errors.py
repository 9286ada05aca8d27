"""Errors the core raises to components and the API (which maps them to 307 redirects and 404s)."""

from __future__ import annotations


class NotLeader(Exception):
    """A write or a command reached a coordinator that does not (or no longer) lead. ``leader_url`` is where
    to send it (None while no leader is known, e.g. during an election: retry shortly)."""

    def __init__(self, leader_url: str | None = None, leader_id: str | None = None) -> None:
        self.leader_url = leader_url
        self.leader_id = leader_id
        where = f"the leader {leader_id} at {leader_url}" if leader_url else "no leader is known yet; retry shortly"
        super().__init__(f"this coordinator does not lead; send writes to {where}")


class UnknownNode(LookupError):
    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        super().__init__(f"node {node_id!r} is not in the fleet view (check the name with `myoloctl get nodes`)")


class ComponentError(Exception):
    """Components failed on one event; the others already handled it. The consumer retries (then
    dead-letters) the event, and the core hands it again only to the components named here."""

    def __init__(self, failed: dict[str, BaseException]) -> None:
        self.failed = failed
        parts = ", ".join(f"{name}: {type(exc).__name__}: {exc}" for name, exc in failed.items())
        super().__init__(f"component(s) failed on the event: {parts}")
