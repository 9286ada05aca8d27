"""Node identity for tests with real coordinators: enrol the nodes a test plays, and sign their events.

A coordinator refuses a node's faults, acks and training events unless the node's enrolled key signed them
and they come from its agent's source. Tests enrol the way an admin does: through the nodes component's
enrolment (what ``PUT /v1/nodes/{node_id}/key`` calls) on the leader, or over HTTP for coordinator processes
(:func:`enroll_over_api`), then wait until every coordinator has read the key from the state topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence

from myolo.common.clock import Clock
from myolo.common.keys import Ed25519Public, Ed25519Signer
from myolo.coordinator.cli.auth import Token
from myolo.coordinator.cli.client import ApiClient
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.localstack.identity import enroll_nodes
from myolo.coordinator.nodes.api import NodeKeys
from myolo.events.bus import EventProducer
from myolo.events.codec import encode_structured
from myolo.events.envelope import Event, new_event
from myolo.events.payloads import Payload
from myolo.events.signing import sign
from myolo.events.sources import agent_source
from tests.support.helpers import wait_until

Key = Ed25519Public | Ed25519Signer | str


def pem(key: Key) -> str:
    if isinstance(key, str):
        return key
    return (key.public if isinstance(key, Ed25519Signer) else key).pem()


def _key_id(key: Key) -> str | None:
    return None if isinstance(key, str) else key.key_id


async def enroll(leader: Coordinator, keys: Mapping[str, Key], everywhere: Sequence[Coordinator] = ()) -> None:
    """Enrol each node's key on the leader; return once ``everywhere`` (the other coordinators) trust it too."""
    nodes = leader.get(NodeKeys)
    for node, key in keys.items():
        await nodes.enroll(node, pem(key), "admin:test")
    await known_everywhere([leader, *everywhere], keys)


async def known_everywhere(coordinators: Iterable[Coordinator], keys: Mapping[str, Key]) -> None:
    def known() -> bool:
        for coord in coordinators:
            for node, key in keys.items():
                rec = coord.get(NodeKeys).key_of(node)
                if rec is None or rec.revoked or (_key_id(key) not in (None, rec.key_id)):
                    return False
        return True

    await wait_until(known, 30, "every coordinator trusting the enrolled keys")


async def enroll_over_api(api_urls: list[str], keys: Mapping[str, Key], token: str | None = None) -> dict[str, str]:
    """Enrol through a coordinator process's HTTP API (a standby redirects to the leader), as an admin does
    (``token``: an admin's, where the API authenticates its callers)."""
    client = ApiClient(api_urls, timeout=10.0, token=Token(token, "test") if token else None)
    return await asyncio.to_thread(enroll_nodes, client, {n: pem(k) for n, k in keys.items()})


class PlayedNodes:
    """The nodes a test plays through one producer: each with its own key, its events from its agent's source,
    signed as its agent signs them (telemetry goes unsigned, as the agent sends it)."""

    def __init__(self, producer: EventProducer, clock: Clock) -> None:
        self.producer = producer
        self.clock = clock
        self.keys: dict[str, Ed25519Signer] = {}

    def key(self, node: str) -> Ed25519Signer:
        if node not in self.keys:
            self.keys[node] = Ed25519Signer.generate()
        return self.keys[node]

    async def enroll(self, leader: Coordinator, *nodes: str, everywhere: Sequence[Coordinator] = ()) -> None:
        await enroll(leader, {n: self.key(n) for n in nodes}, everywhere)

    def event(self, payload: Payload, *, signed: bool = True) -> Event:
        node: str = payload.node_id  # type: ignore[attr-defined]
        event = new_event(payload, agent_source(node), clock=self.clock)
        return sign(event, self.key(node)) if signed else event

    async def send(self, payload: Payload, *, signed: bool = True) -> Event:
        return await self.producer.send(self.event(payload, signed=signed))


def signed_structured(payload: Payload, signer: Ed25519Signer) -> bytes:
    """A structured-mode CloudEvent from the payload's node's agent, signed with ``signer`` (for kcat)."""
    node: str = payload.node_id  # type: ignore[attr-defined]
    return encode_structured(sign(new_event(payload, agent_source(node)), signer))
