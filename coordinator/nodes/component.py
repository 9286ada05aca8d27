"""The nodes component: enrolled node keys (``myolo.state.node-keys``) and the check of every node event that
causes action against them.

Enrolment and revocation are the leader's writes, recorded before they take effect; every coordinator follows
the topic and verifies with what it read, so a standby refuses what the leader refuses. The check runs in the
ingest consumer before any component sees the event (``guards``): a refused event is dead-lettered with its
reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import structlog

from myolo.common.errors import ConfigError
from myolo.common.keys import Ed25519Public, public_key_from_pem
from myolo.coordinator.core.component import Component, RouteSet, StateTopic
from myolo.coordinator.core.context import Context
from myolo.coordinator.nodes import routes
from myolo.coordinator.nodes.interface import NotEnrolled
from myolo.coordinator.nodes.records import KIND, STATE_NODE_KEYS, NodeKeyRecord
from myolo.coordinator.nodes.verify import Enrolled, check_node_event
from myolo.events.envelope import Event
from myolo.events.errors import SignatureError
from myolo.events.payloads import CommandAck, NodeFault, NodeSample, TrainingCompleted, TrainingFault
from myolo.events.signing import must_sign

log = structlog.get_logger("myolo.coordinator.nodes")


class Nodes(Component):
    name = "nodes"
    openapi = Path(__file__).with_name("openapi.yaml")
    owns = (
        StateTopic(
            STATE_NODE_KEYS,
            {KIND: NodeKeyRecord},
            partitions=6,
            key="node id",
            description="coordinator state: enrolled node public keys (node events that cause action are verified)",
        ),
    )
    guards = (NodeFault, CommandAck, TrainingFault, TrainingCompleted, NodeSample)  # myolo.events.signing.must_sign

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self._enrolled: dict[str, Enrolled] = {}
        self.verified = 0
        self.refused = 0

    # ---- the ingest check ------------------------------------------------------------------------------------
    def verify(self, event: Event) -> None:
        if not must_sign(event):
            return  # a healthy sample: telemetry, taken unsigned
        node_id: str = event.data.node_id
        try:
            check_node_event(event, node_id, self._enrolled.get(node_id))
        except SignatureError:
            self.refused += 1
            raise
        self.verified += 1

    # ---- NodeKeys ----------------------------------------------------------------------------------------------
    async def enroll(self, node_id: str, public_key: str, by: str) -> tuple[NodeKeyRecord, str]:
        epoch = self.ctx.leadership.require()
        key = public_key_from_pem(public_key, "public_key")
        current = self._enrolled.get(node_id)
        active = current is not None and not current.record.revoked
        if active and current is not None and current.record.key_id == key.key_id:
            return current.record, "unchanged"
        record = NodeKeyRecord(
            node_id=node_id,
            public_key=key.pem(),
            key_id=key.key_id,
            enrolled_at=self.ctx.clock.now(),
            by=by,
            epoch=epoch,
        )
        await self.ctx.store.put(STATE_NODE_KEYS, node_id, record)
        self._enrolled[node_id] = Enrolled(record, key)
        change = "replaced" if active else "enrolled"
        log.info("node key " + change, node=node_id, key_id=key.key_id, by=by, epoch=epoch)
        return record, change

    async def revoke(self, node_id: str, by: str) -> NodeKeyRecord:
        epoch = self.ctx.leadership.require()
        current = self._enrolled.get(node_id)
        if current is None:
            raise NotEnrolled(node_id)
        if current.record.revoked:
            return current.record
        record = msgspec.structs.replace(
            current.record, revoked=True, revoked_at=self.ctx.clock.now(), revoked_by=by, epoch=epoch
        )
        await self.ctx.store.put(STATE_NODE_KEYS, node_id, record)
        self._enrolled[node_id] = Enrolled(record, current.key)
        log.warning("node key revoked", node=node_id, key_id=record.key_id, by=by, epoch=epoch)
        return record

    def key_of(self, node_id: str) -> NodeKeyRecord | None:
        found = self._enrolled.get(node_id)
        return found.record if found is not None else None

    def key_records(self) -> tuple[NodeKeyRecord, ...]:
        return tuple(self._enrolled[n].record for n in sorted(self._enrolled))

    # ---- hooks ----------------------------------------------------------------------------------------------
    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        if record is None:
            self._enrolled.pop(key, None)
            return
        if not isinstance(record, NodeKeyRecord):
            return
        held = self._enrolled.get(record.node_id)
        if held is not None and record.changed_at < held.record.changed_at:
            return  # our own echo of an older decision, arriving after a newer one was applied
        self._enrolled[record.node_id] = Enrolled(record, _read_key(record))

    def api(self) -> RouteSet:
        return RouteSet(routes.routes(self), self.openapi, admin_routes=routes.ADMIN_ROUTES)

    def stats(self) -> dict[str, int]:
        active = sum(1 for e in self._enrolled.values() if not e.record.revoked)
        return {
            "node_keys_enrolled": active,
            "node_events_verified": self.verified,
            "node_events_refused": self.refused,
        }

    def status(self) -> dict[str, Any]:
        return {
            "node_keys": [{"node_id": r.node_id, "key_id": r.key_id, "revoked": r.revoked} for r in self.key_records()]
        }


def _read_key(record: NodeKeyRecord) -> Ed25519Public | None:
    """The record's key, or None when its PEM does not read as the key id it names (never trust a record's
    word for which key it holds)."""
    try:
        key = public_key_from_pem(record.public_key, "public_key")
    except ConfigError as exc:
        log.error("node key record unreadable", node=record.node_id, error=exc.reason)
        return None
    if key.key_id != record.key_id:
        log.error("node key record names another key", node=record.node_id, key_id=record.key_id, actual=key.key_id)
        return None
    return key
