"""The nodes component without a broker: enrolment and revocation (recorded before they take effect), the
keys rebuilt from the state topic, the check of node events at ingest, and its admin API. The same paths on
the real broker with real processes: tests/integration/coordinator/test_forged_events.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from myolo.common.errors import ConfigError
from myolo.common.keys import Ed25519Signer, HmacKey
from myolo.coordinator.api.app import create_app
from myolo.coordinator.core.component import Component
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.core.errors import NotLeader
from myolo.coordinator.core.ingest_guard import IngestGuard
from myolo.coordinator.core.leadership import LeaderTerm
from myolo.coordinator.nodes.component import Nodes
from myolo.coordinator.nodes.interface import NotEnrolled
from myolo.coordinator.nodes.records import STATE_NODE_KEYS, NodeKeyRecord
from myolo.coordinator.nodes.routes import ADMIN_ROUTES
from myolo.events.codec import decode, encode
from myolo.events.envelope import Event, new_event
from myolo.events.errors import SignatureError
from myolo.events.payloads import CommandAck, NodeFault, NodeSample, TrainingCompleted
from myolo.events.signing import GUARDED_NODE_EVENTS, SIGNED_NODE_EVENTS, sign
from myolo.events.sources import agent_source
from tests.support.api_auth import ADMIN, OPERATOR, VIEWER, bearer, security
from tests.support.coordinator.offline import offline_coordinator
from tests.support.coordinator.recorder import recording_producers

NODE = "node-7"
ALICE = Ed25519Signer.generate()  # node-7's key
MALLORY = Ed25519Signer.generate()  # another node's key


@pytest.fixture
def writes_and_coord(tmp_path) -> tuple[list, Coordinator]:
    writes, producers = recording_producers()
    return writes, offline_coordinator(tmp_path, producers=producers)


@pytest.fixture
async def leader(writes_and_coord) -> Coordinator:
    _, coord = writes_and_coord
    await coord.assume_term(LeaderTerm(epoch=3, instance_id="me", started=0.0))
    return coord


def nodes(coord: Coordinator) -> Nodes:
    return coord.get(Nodes)


def fault(node_id: str = NODE, source: str | None = None, signer=ALICE, clock=None) -> Event:
    """An XID 79 fault of ``node_id`` as it arrives from Kafka (signed by ``signer`` unless None)."""
    payload = NodeFault(node_id=node_id, kind="xid", health="fail", xid=79, reasons=["XID 79"])
    event = new_event(payload, source or agent_source(node_id), clock=clock)
    if signer is not None:
        event = sign(event, signer)
    key, value, headers = encode(event)
    return decode(value, headers, key)


def refusal(coord: Coordinator, event: Event) -> SignatureError:
    with pytest.raises(SignatureError) as exc:
        coord.guard.verify(event)
    return exc.value


# ---- enrolment -------------------------------------------------------------------------------------------------
async def test_enrolment_is_recorded_before_it_is_trusted(leader, writes_and_coord) -> None:
    writes, _ = writes_and_coord
    record, change = await nodes(leader).enroll(NODE, ALICE.public.pem(), "admin:alice")
    assert change == "enrolled"
    assert (record.node_id, record.key_id, record.by, record.epoch) == (NODE, ALICE.key_id, "admin:alice", 3)
    assert writes == [(STATE_NODE_KEYS, record)]
    leader.guard.verify(fault())  # trusted from now on
    assert nodes(leader).stats()["node_events_verified"] == 1

    again, change = await nodes(leader).enroll(NODE, ALICE.public.pem() + "\n", "admin:bob")
    assert change == "unchanged" and again == record and len(writes) == 1  # nothing to record

    replaced, change = await nodes(leader).enroll(NODE, MALLORY.public.pem(), "admin:alice")
    assert change == "replaced" and replaced.key_id == MALLORY.key_id and len(writes) == 2
    assert "signed with key id" in refusal(leader, fault()).reason  # the old key verifies nothing any more


@pytest.mark.parametrize(
    ("pem", "words"),
    [
        ("not a key", "not a PEM public key"),
        (HmacKey.of(b"x" * 32).secret.hex(), "not a PEM public key"),
        (ALICE.pem().decode(), "not a PEM public key"),  # a private key is never what we enrol
    ],
    ids=["text", "hmac-secret", "private-key"],
)
async def test_a_bad_key_is_refused_naming_the_field(leader, pem: str, words: str) -> None:
    with pytest.raises(ConfigError) as exc:
        await nodes(leader).enroll(NODE, pem, "admin:alice")
    assert exc.value.key == "public_key" and words in exc.value.reason
    assert nodes(leader).key_of(NODE) is None


async def test_a_standby_neither_enrolls_nor_revokes(writes_and_coord) -> None:
    writes, coord = writes_and_coord
    with pytest.raises(NotLeader):
        await nodes(coord).enroll(NODE, ALICE.public.pem(), "admin:alice")
    with pytest.raises(NotLeader):
        await nodes(coord).revoke(NODE, "admin:alice")
    assert writes == []


async def test_revocation_is_recorded_and_refuses_the_nodes_events(leader, writes_and_coord) -> None:
    writes, _ = writes_and_coord
    with pytest.raises(NotEnrolled):
        await nodes(leader).revoke(NODE, "admin:alice")
    await nodes(leader).enroll(NODE, ALICE.public.pem(), "admin:alice")
    revoked = await nodes(leader).revoke(NODE, "admin:bob")
    assert (revoked.revoked, revoked.revoked_by, revoked.key_id) == (True, "admin:bob", ALICE.key_id)
    assert writes[-1] == (STATE_NODE_KEYS, revoked)
    assert await nodes(leader).revoke(NODE, "admin:carol") == revoked and len(writes) == 2  # twice: no change
    reason = refusal(leader, fault()).reason
    assert f"node {NODE!r} is revoked" in reason and "admin:bob" in reason
    _, change = await nodes(leader).enroll(NODE, ALICE.public.pem(), "admin:alice")  # enrolled again on purpose
    assert change == "enrolled"
    leader.guard.verify(fault())


# ---- what every coordinator reads from the state topic ----------------------------------------------------------
def record(signer: Ed25519Signer, at: float = 1.0, **over) -> NodeKeyRecord:
    base = NodeKeyRecord(node_id=NODE, public_key=signer.public.pem(), key_id=signer.key_id, enrolled_at=at, by="a")
    return msgspec.structs.replace(base, **over)


def test_a_standby_verifies_with_what_it_read(writes_and_coord) -> None:
    _, coord = writes_and_coord
    coord.apply_state(STATE_NODE_KEYS, NODE, record(ALICE), "node-key")
    coord.guard.verify(fault())
    coord.apply_state(STATE_NODE_KEYS, NODE, record(MALLORY, at=2.0), "node-key")
    coord.apply_state(STATE_NODE_KEYS, NODE, record(ALICE, at=1.5), "node-key")  # a late echo of an older one
    assert nodes(coord).key_of(NODE).key_id == MALLORY.key_id
    coord.apply_state(STATE_NODE_KEYS, NODE, None, "node-key")  # a tombstone: forgotten
    assert "is not enrolled" in refusal(coord, fault(signer=MALLORY)).reason


def test_a_record_whose_pem_is_not_the_key_it_names_verifies_nothing(writes_and_coord) -> None:
    _, coord = writes_and_coord
    coord.apply_state(STATE_NODE_KEYS, NODE, record(ALICE, key_id=MALLORY.key_id), "node-key")
    assert "cannot be read" in refusal(coord, fault(signer=MALLORY)).reason
    coord.apply_state(STATE_NODE_KEYS, NODE, record(ALICE, at=2.0, public_key="garbage"), "node-key")
    assert "cannot be read" in refusal(coord, fault()).reason


# ---- the check at ingest: each forgery refused with its reason ---------------------------------------------------
async def test_each_forgery_is_refused_with_its_reason(leader) -> None:
    await nodes(leader).enroll(NODE, ALICE.public.pem(), "admin:alice")
    await nodes(leader).enroll("node-8", MALLORY.public.pem(), "admin:alice")
    cases = {
        "unsigned, from an attacker": (fault(source="attacker-laptop", signer=None), "source", "attacker-laptop"),
        "signed, from an attacker": (fault(source="attacker-laptop"), "source", "is not node-7's agent"),
        "unsigned": (fault(signer=None), "header ce_sig", "is not signed"),
        "another node's key": (fault(signer=MALLORY), "header ce_sigkeyid", f"expected {ALICE.key_id!r}"),
        "a node not enrolled": (fault("node-9", signer=ALICE), "data.node_id", "'node-9' is not enrolled"),
        "another node's source": (fault(source=agent_source("node-8")), "source", "is not node-7's agent"),
    }
    for name, (event, field, words) in cases.items():
        exc = refusal(leader, event)
        assert (exc.field, words in exc.reason) == (field, True), (name, exc)
    tampered = fault()
    tampered = msgspec.structs.replace(tampered, raw_data=tampered.raw_data.replace(b"79", b"48"))
    assert "signature does not match" in refusal(leader, tampered).reason
    assert nodes(leader).stats()["node_events_refused"] == len(cases) + 1
    leader.guard.verify(fault())  # and the real one passes


async def test_every_event_that_causes_action_is_guarded_and_telemetry_is_not(leader) -> None:
    guarded = {t for t, comps in leader.guard.by_type.items() if comps}
    assert guarded == set(GUARDED_NODE_EVENTS) == set(SIGNED_NODE_EVENTS) | {"ai.myolo.node.sample.v1"}
    sample = new_event(NodeSample(node_id=NODE, backend="sim", gpus=[]), "anyone")
    leader.guard.verify(sample)  # a healthy sample is telemetry the coordinator only displays: unsigned
    ack = new_event(CommandAck(command_id="c1", node_id=NODE, epoch=3, status="done"), agent_source(NODE))
    assert "not enrolled" in refusal(leader, ack).reason
    await nodes(leader).enroll(NODE, ALICE.public.pem(), "admin:alice")
    done = new_event(TrainingCompleted(job_id="j", generation=1, node_id=NODE, ranks=[0]), agent_source(NODE))
    assert "is not signed" in refusal(leader, done).reason
    leader.guard.verify(sign(done, ALICE))


async def test_a_sample_reporting_bad_health_must_be_signed_by_its_node(leader) -> None:
    """A FAIL sample cordons a node (its fault event may have gone missing), so a forged one would too: it is
    refused unless the node's agent signed it; the same sample signed by the node passes."""
    await nodes(leader).enroll(NODE, ALICE.public.pem(), "admin:alice")
    for health in ("fail", "warn"):
        payload = NodeSample(node_id=NODE, backend="sim", gpus=[], health=health, health_reasons=["gpu 0: XID 79"])
        forged = new_event(payload, "attacker-laptop")
        assert "is not" in refusal(leader, forged).reason
        unsigned = new_event(payload, agent_source(NODE))
        assert "is not signed" in refusal(leader, unsigned).reason
        assert "signed with key id" in refusal(leader, sign(unsigned, MALLORY)).reason
        leader.guard.verify(sign(unsigned, ALICE))
    assert nodes(leader).stats()["node_events_refused"] == 6


def test_a_coordinator_that_would_act_on_unverified_node_events_does_not_start(tmp_path) -> None:
    class Careless(Component):
        name = "careless"
        consumes = (NodeFault,)

    with pytest.raises(ValueError, match=r"careless consumes ai\.myolo\.node\.fault\.v1.*no component guards it"):
        IngestGuard([Careless.__new__(Careless)], SIGNED_NODE_EVENTS)


# ---- the admin API -----------------------------------------------------------------------------------------------
@pytest.fixture
async def client(leader) -> AsyncIterator[TestClient]:
    parts = [p for p in (c.api() for c in leader.peers) if p is not None]
    client = TestClient(TestServer(create_app(leader, parts, security())), headers=bearer(ADMIN))
    await client.start_server()
    yield client
    await client.close()


async def test_the_api_enrols_reads_lists_and_revokes(client: TestClient) -> None:
    url = f"/v1/nodes/{NODE}/key"
    resp = await client.put(url, json={"public_key": ALICE.public.pem()})
    assert resp.status == 201, await resp.text()
    body = await resp.json()
    assert (body["change"], body["key_id"], body["node_id"]) == ("enrolled", ALICE.key_id, NODE)
    assert body["by"] == f"operator:{ADMIN}"  # the token's name, whatever the body says
    assert (await client.put(url, json={"public_key": ALICE.public.pem()})).status == 200
    assert (await (await client.get(url)).json())["key_id"] == ALICE.key_id
    listed = (await (await client.get("/v1/node-keys")).json())["items"]
    assert [(k["node_id"], k["key_id"]) for k in listed] == [(NODE, ALICE.key_id)]
    revoked = await client.delete(url, json={})
    assert revoked.status == 200 and (await revoked.json())["revoked"] is True
    missing = await client.get("/v1/nodes/node-9/key")
    assert missing.status == 404 and (await missing.json())["field"] == "node_id"
    assert (await client.delete("/v1/nodes/node-9/key", json={})).status == 404
    assert (await client.head(url)).status == 405  # no HEAD twin telling a viewer who is enrolled


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b'{"public_key": "-----BEGIN PUBLIC KEY-----\\nAAAA\\n-----END PUBLIC KEY-----"}', "public_key", "PEM"),
        (b'{"public_key": 5}', "public_key", "Expected `str`"),
        (b'{"pubkey": "x"}', "pubkey", "unknown field"),
        (b"{}", "public_key", "missing required field"),
    ],
)
async def test_a_bad_enrolment_is_a_400_naming_the_field(
    client: TestClient, body: bytes, field: str, words: str
) -> None:
    resp = await client.put(f"/v1/nodes/{NODE}/key", data=body, headers={"Content-Type": "application/json"})
    answer = await resp.json()
    assert resp.status == 400 and answer["field"] == field and words in answer["error"], answer
    assert "node.key.pub" in answer["hint"]


@pytest.mark.parametrize("who", [VIEWER, OPERATOR])
async def test_only_an_admin_reads_or_changes_node_keys(client: TestClient, who: str) -> None:
    url = f"/v1/nodes/{NODE}/key"
    asks = [
        client.get("/v1/node-keys", headers=bearer(who)),
        client.get(url, headers=bearer(who)),
        client.put(url, json={"public_key": ALICE.public.pem()}, headers=bearer(who)),
        client.delete(url, json={}, headers=bearer(who)),
    ]
    for ask in asks:
        resp = await ask
        assert resp.status == 403 and "needs the admin role" in (await resp.json())["error"]


def test_every_node_key_route_is_an_admins(leader) -> None:
    part = nodes(leader).api()
    routed = {(r.method, r.path) for r in part.routes}
    assert set(ADMIN_ROUTES) == routed and part.admin_routes == ADMIN_ROUTES
