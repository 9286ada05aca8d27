"""Forged node events against a real coordinator on the real broker: each probe is refused.

Three nodes are enrolled; one of them has a command pending. A fault naming a real node is sent from
``attacker-laptop`` by our own producer and by the official CloudEvents SDK for Python over kcat (librdkafka),
with the node's own source but unsigned, signed with another node's key, or signed and then edited; a forged
``done`` ack for the pending command; a correctly signed fault of a revoked node and of a node never enrolled; a node sample reporting FAIL health (which
cordons a node whose fault event went missing) from ``attacker-laptop`` and from the node's source unsigned.
Each is dead-lettered on ``myolo.deadletter`` with its reason, by the coordinator's group, before any component
sees it: nothing is cordoned, no drain is sent, the command's intent stays open. Then the enrolled node's own
signed fault cordons it and its signed ack closes the command: the path works, for the real thing only.
"""

from __future__ import annotations

import uuid

import msgspec
from cloudevents.core.bindings import kafka as ce_kafka
from cloudevents.core.v1.event import CloudEvent

from myolo.common.keys import Ed25519Signer
from myolo.coordinator.nodes.api import NodeKeys
from myolo.coordinator.nodes.component import Nodes
from myolo.events.codec import decode
from myolo.events.deadletter import DLQ_PREFIX, dead_letter_info
from myolo.events.envelope import Event, new_event
from myolo.events.payloads import CommandAck, GpuReading, NodeFault, NodeSample
from myolo.events.payloads.commands import ReportSampleArgs
from myolo.events.signing import sign
from myolo.events.sources import agent_source
from myolo.events.topics import COMMAND_ACKS, DEAD_LETTER, NODE_FAULTS
from tests.integration.coordinator.conftest import commands, fleet, read_topic, wait_until
from tests.support.coordinator.identity import PlayedNodes
from tests.support.helpers import kcat


def xid79(node: str) -> NodeFault:
    return NodeFault(node_id=node, kind="xid", health="fail", xid=79, gpu_index=0, reasons=["XID 79"])


def sdk_fault(event_id: str, node: str, source: str, extensions: dict[str, str] | None = None) -> CloudEvent:
    """The fault as someone with the CloudEvents SDK (not our code) writes it."""
    attrs = {"id": event_id, "type": "ai.myolo.node.fault.v1", "source": source, "partitionkey": node}
    attrs |= {"datacontenttype": "application/json", **(extensions or {})}
    return CloudEvent(attrs, msgspec.to_builtins(xid79(node)))


def send_with_kcat(bootstrap: str, topic: str, message: ce_kafka.KafkaMessage) -> None:
    headers = {k: v.decode() for k, v in message.headers.items()}
    key = message.key.decode() if isinstance(message.key, bytes) else str(message.key)
    kcat(bootstrap, topic, key, message.value, headers)


async def letters_of(settings, group: str, ids: set[str]) -> dict[str, dict[str, str]]:
    """The dead letters of ``group`` for the events ``ids``: {event id: our headers (reason, field, ...)}."""
    found = {}
    for key, value, headers in await read_topic(settings, DEAD_LETTER):
        info = dead_letter_info(headers)
        if info.get("group") != group:
            continue
        original = [(k, v) for k, v in headers if not k.startswith(DLQ_PREFIX)]
        event_id = decode(value, original, key.encode() if key else None).id
        if event_id in ids:
            found[event_id] = info
    return found


async def test_forged_node_events_are_dead_lettered_and_never_acted_on(
    kafka, settings, make_config, services, producer, clock
) -> None:
    tag = uuid.uuid4().hex[:6]
    node, other, revoked, stranger = (f"{n}-{tag}" for n in ("node-7", "node-8", "node-r", "node-x"))
    svc = await services.start(make_config(f"forge-{tag}", MYOLO_FLEET_LOST_AFTER_S="3600"), clock)
    await wait_until(lambda: svc.is_leader, 30, "leadership")
    await wait_until(svc.ingest.ready.is_set, 30, "ingest assignment")
    played = PlayedNodes(producer, clock)
    await played.enroll(svc, node, other, revoked)
    await svc.get(NodeKeys).revoke(revoked, "admin:test")
    gpus = [GpuReading(index=0, uuid="GPU-0", name="sim")]
    while not all(fleet(svc).node(n) for n in (node, other, revoked, stranger)):  # "latest": until it is read
        for n in (node, other, revoked, stranger):
            await producer.send(NodeSample(node_id=n, backend="sim", gpus=gpus))  # telemetry: unsigned, accepted
        await wait_until(lambda: True)
    pending = await commands(svc).issue(node, ReportSampleArgs())
    attacker = Ed25519Signer.generate()  # a key the attacker made: enrolled nowhere

    def ids(name: str) -> str:
        return f"{tag}-{name}"

    def ours(name: str, payload, source: str, signer=None) -> Event:
        event = new_event(payload, source, clock=clock, event_id=ids(name))
        return sign(event, signer) if signer is not None else event

    edited = ours("edited", xid79(node), agent_source(node), played.key(node))
    edited = msgspec.structs.replace(edited, data=msgspec.structs.replace(edited.data, xid=48, reasons=["XID 48"]))
    fail_sample = NodeSample(node_id=node, backend="sim", gpus=gpus, health="fail", health_reasons=["XID 79"])
    forged_ack = CommandAck(
        command_id=pending.command_id, node_id=node, epoch=svc.epoch, status="done", result={"forged": True}
    )
    sent_by_us = {  # name -> (event, field, words of the reason)
        "unsigned-attacker": (
            ours("unsigned-attacker", xid79(node), "attacker-laptop"),
            "source",
            f"source 'attacker-laptop' is not {node}'s agent",
        ),
        "unsigned": (ours("unsigned", xid79(node), agent_source(node)), "header ce_sig", "is not signed"),
        "other-nodes-key": (
            ours("other-nodes-key", xid79(node), agent_source(node), played.key(other)),
            "header ce_sigkeyid",
            f"signed with key id {played.key(other).key_id!r}, expected {played.key(node).key_id!r}",
        ),
        "attackers-key": (
            ours("attackers-key", xid79(node), agent_source(node), attacker),
            "header ce_sigkeyid",
            f"signed with key id {attacker.key_id!r}",
        ),
        "edited": (edited, "header ce_sig", "signature does not match"),
        "revoked": (
            ours("revoked", xid79(revoked), agent_source(revoked), played.key(revoked)),
            "data.node_id",
            f"node {revoked!r} is revoked",
        ),
        "stranger": (
            ours("stranger", xid79(stranger), agent_source(stranger), played.key(stranger)),
            "data.node_id",
            f"node {stranger!r} is not enrolled",
        ),
        "forged-ack": (ours("forged-ack", forged_ack, agent_source(node)), "header ce_sig", "is not signed"),
        "forged-ack-attacker": (
            ours("forged-ack-attacker", forged_ack, "attacker-laptop", played.key(other)),
            "source",
            "is not",
        ),
        "fail-sample-attacker": (
            ours("fail-sample-attacker", fail_sample, "attacker-laptop"),
            "source",
            f"source 'attacker-laptop' is not {node}'s agent",
        ),
        "fail-sample-unsigned": (
            ours("fail-sample-unsigned", fail_sample, agent_source(node)),
            "header ce_sig",
            "is not signed",
        ),
    }
    sent_by_sdk = {  # name -> (Kafka message from the CloudEvents SDK, field, words of the reason)
        "sdk-binary-attacker": (
            ce_kafka.to_binary_event(sdk_fault(ids("sdk-binary-attacker"), node, "attacker-laptop")),
            "source",
            f"source 'attacker-laptop' is not {node}'s agent",
        ),
        "sdk-structured-spoofed": (
            ce_kafka.to_structured_event(sdk_fault(ids("sdk-structured-spoofed"), node, agent_source(node))),
            "header ce_sig",
            "is not signed",
        ),
        "sdk-made-up-signature": (
            ce_kafka.to_binary_event(
                sdk_fault(
                    ids("sdk-made-up-signature"),
                    node,
                    agent_source(node),
                    {"sigkeyid": played.key(node).key_id, "sig": "00" * 64},
                )
            ),
            "header ce_sig",
            "signature does not match",
        ),
    }
    dl0, refused0 = svc.ingest.stats.dead_lettered, svc.get(Nodes).refused
    for event, *_ in sent_by_us.values():
        await producer.send(event)
    for message, *_ in sent_by_sdk.values():
        send_with_kcat(kafka.bootstrap, NODE_FAULTS, message)
    total = len(sent_by_us) + len(sent_by_sdk)
    await wait_until(lambda: svc.ingest.stats.dead_lettered >= dl0 + total, 60, "every forgery dead-lettered")

    # nothing was acted on
    assert svc.get(Nodes).refused == refused0 + total
    assert not any(fleet(svc).node(n).cordoned for n in (node, revoked, stranger))
    assert fleet(svc).node(node).health == "ok" and not fleet(svc).node(node).recent_faults
    assert not [i for i in commands(svc).intents() if i.action == "drain"]
    assert commands(svc).intent(pending.command_id).status == "pending"

    # each on myolo.deadletter, with its reason, by this coordinator's group
    expected = {ids(n): (field, words) for n, (_, field, words) in (sent_by_us | sent_by_sdk).items()}
    letters = await letters_of(settings, svc.ingest.group_id, set(expected))
    assert set(letters) == set(expected), sorted(set(expected) - set(letters))
    for event_id, (field, words) in expected.items():
        assert letters[event_id]["field"] == field, (event_id, letters[event_id])
        assert words in letters[event_id]["reason"], (event_id, letters[event_id]["reason"])
    assert letters[ids("forged-ack")]["topic"] == COMMAND_ACKS

    # the real thing: the node's own signed fault cordons it and drains it; its signed ack closes the command
    await played.send(xid79(node))
    await wait_until(lambda: fleet(svc).node(node).cordoned, 30, "the cordon of a genuine fault")
    assert fleet(svc).node(node).cordon.by == "auto:fault"
    await wait_until(
        lambda: any(i.node_id == node and i.action == "drain" for i in commands(svc).intents()), 30, "drain"
    )
    await played.send(msgspec.structs.replace(forged_ack, result={"sample": "sent"}))
    await wait_until(lambda: commands(svc).intent(pending.command_id).status == "done", 30, "the genuine ack")
    assert commands(svc).intent(pending.command_id).result == {"sample": "sent"}
    assert not fleet(svc).node(revoked).cordoned and fleet(svc).node(stranger) is not None
    assert svc.ended_tasks() == []
