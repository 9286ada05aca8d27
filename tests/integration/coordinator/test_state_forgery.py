"""Forged state records on the real broker, against real coordinators: whoever writes to a state topic without
the coordinators' key (unsealed, or sealed with a key of their own) is skipped, counted as forged and never
acted on — a pending command intent is not sent by the next leader, a leader term with a higher epoch deposes
nobody, a tombstone or an uncordon does not lift a cordon. A rotation of the coordinators' key keeps the state."""

from __future__ import annotations

import uuid

from myolo.common.keys import Ed25519Signer
from myolo.coordinator.commands.records import STATE_COMMANDS, CommandIntent
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.cordons.records import STATE_NODES, CordonRecord
from myolo.coordinator.core.coordinator import Coordinator, state_codec
from myolo.coordinator.core.leadership import STATE_COORDINATOR, TERM_KEY, LeaderTerm
from myolo.coordinator.state import StateKeys
from myolo.coordinator.state.codec import KIND_HEADER
from myolo.events.bus import EventProducer
from myolo.events.codec import decode
from myolo.events.payloads import GpuReading, NodeSample
from myolo.events.payloads.commands import ReportSampleArgs
from myolo.events.topics import COMMANDS
from tests.integration.coordinator.conftest import commands, cordons, fleet, one_leader, read_topic, wait_until
from tests.support.helpers import new_ed25519_key

CODEC = state_codec(COMPONENTS)
ATTACKER = StateKeys.derive(Ed25519Signer.generate())  # a key of their own: not derived from ours


async def forge(producer: EventProducer, topic: str, key: str, record, kind: str, *, sealed: bool) -> None:
    """Write a state record as an outsider: the kind header is all it takes to look like ours."""
    value = None if record is None else CODEC.encode(record)[0]
    headers = [(KIND_HEADER, kind.encode())]
    if sealed:
        headers.append(ATTACKER.seal(topic, key.encode(), kind, value))
    await producer.send_raw(topic, value, key.encode(), headers)


async def forged_seen(svc: Coordinator, before: int, n: int) -> None:
    await wait_until(lambda: svc.tail.forged >= before + n, 30, f"{n} forged state records skipped")


async def test_a_forged_pending_intent_is_never_sent_by_the_next_leader(
    settings, make_config, services, producer, clock
) -> None:
    tag = uuid.uuid4().hex[:6]
    node, victim = f"g-{tag}", f"v-{tag}"
    first = await services.start(make_config(f"c1-{tag}"), clock)
    await one_leader(first)
    genuine = await commands(first).issue(node, ReportSampleArgs())  # never acknowledged: the next leader resends
    forged = [f"forged-{tag}-{i}" for i in (1, 2)]
    before = first.tail.forged
    for command_id, sealed in zip(forged, (False, True), strict=True):
        intent = CommandIntent(command_id=command_id, node_id=victim, action="drain", epoch=1, created=clock.now())
        await forge(producer, STATE_COMMANDS, command_id, intent, "command", sealed=sealed)
    await forged_seen(first, before, 2)
    assert not set(forged) & set(commands(first).dispatcher.intents)

    await services.stop(first)  # the leader goes; the next one reads the state to the end and resends
    second = await services.start(make_config(f"c2-{tag}"), clock)
    await one_leader(second)
    assert second.stats()["state_forged"] >= 2 and not set(forged) & set(commands(second).dispatcher.intents)

    sent: list = []

    async def resent() -> bool:
        sent[:] = [
            decode(v, h, k.encode()).data for k, v, h in await read_topic(settings, COMMANDS) if k in (node, victim)
        ]
        return any(c.command_id == genuine.command_id and c.epoch == second.epoch for c in sent)

    # the genuine intent, written before the forged ones, is resent: by then the forged ones were read too
    await wait_until(resent, 30, "the genuine pending command resent by the next leader", every=0.5)
    assert [c.command_id for c in sent if c.node_id == victim] == []  # nothing for the forged intents


async def test_a_forged_leader_term_with_a_higher_epoch_deposes_nobody(make_config, services, producer, clock) -> None:
    tag = uuid.uuid4().hex[:6]
    leader = await services.start(make_config(f"c1-{tag}"), clock)
    await one_leader(leader)
    epoch, term = leader.epoch, leader.leadership.term
    assert epoch is not None and term is not None
    before = leader.tail.forged
    for sealed in (False, True):
        usurper = LeaderTerm(epoch=epoch + 1000, instance_id=f"attacker-{tag}", started=clock.now(), generation=99)
        await forge(producer, STATE_COORDINATOR, TERM_KEY, usurper, "term", sealed=sealed)
    await forged_seen(leader, before, 2)
    assert leader.is_leader and leader.epoch == epoch and leader.leadership.last_term == term
    # a coordinator starting now replays the same log: its idea of the last term is the genuine one
    standby = await services.start(make_config(f"c2-{tag}"), clock)
    assert standby.leadership.last_term is not None and standby.leadership.last_term.instance_id == leader.instance_id
    new = await one_leader(leader, standby)  # its joining may move leadership: the next epoch follows ours
    assert new.epoch is not None and epoch <= new.epoch < epoch + 1000


async def test_a_forged_tombstone_or_uncordon_does_not_lift_a_cordon(make_config, services, producer, clock) -> None:
    tag = uuid.uuid4().hex[:6]
    node = f"cn-{tag}"
    leader = await services.start(make_config(f"c1-{tag}"), clock)
    await one_leader(leader)
    await wait_until(lambda: leader.ingest.ready.is_set(), 30, "ingest")
    gpus = [GpuReading(index=0, uuid="GPU-0", name="sim")]
    await producer.send(NodeSample(node_id=node, backend="sim", gpus=gpus))
    await wait_until(lambda: fleet(leader).node(node) is not None, 30, "the node in the fleet")
    await cordons(leader).cordon(node, "bad fan", by="alice")
    before = leader.tail.forged
    await forge(producer, STATE_NODES, node, None, "cordon", sealed=False)  # a tombstone deleting the cordon
    lifted = CordonRecord(node_id=node, cordoned=False, reason="forged", by="operator:alice", time=clock.now() + 1e6)
    await forge(producer, STATE_NODES, node, lifted, "cordon", sealed=True)
    await forged_seen(leader, before, 2)
    assert fleet(leader).node(node).cordoned and fleet(leader).node(node).cordon.by == "operator:alice"
    again = await services.start(make_config(f"c2-{tag}"), clock)  # replays cordon, then both forgeries
    assert again.tail.forged >= 2
    found = fleet(again).node(node)
    assert found is not None and found.cordoned and found.cordon.reason == "bad fan"


async def test_a_key_rotation_keeps_the_state(make_config, services, producer, clock, tmp_path) -> None:
    """docs/security-signing.md's rotation: records sealed with the old key are read while it is listed in
    previous_key_files, sealed again by the next leader, and still there once the old key is dropped."""
    tag = uuid.uuid4().hex[:6]
    node = f"rot-{tag}"
    old = str(tmp_path / "coordinator.key")  # the key_file fixture's
    new = tmp_path / "coordinator-2.key"
    new_ed25519_key(new)
    first = await services.start(make_config(f"c1-{tag}"), clock)
    await one_leader(first)
    await wait_until(lambda: first.ingest.ready.is_set(), 30, "ingest")
    await producer.send(NodeSample(node_id=node, backend="sim", gpus=[GpuReading(index=0, uuid="G", name="sim")]))
    await wait_until(lambda: fleet(first).node(node) is not None, 30, "the node in the fleet")
    await cordons(first).cordon(node, "before the rotation", by="alice")
    await services.stop(first)

    rotated = {"MYOLO_SIGNING_KEY_FILE": str(new), "MYOLO_SIGNING_PREVIOUS_KEY_FILES": f'["{old}"]'}
    second = await services.start(make_config(f"c2-{tag}", **rotated), clock)
    await one_leader(second)  # its term seals the old records again
    assert fleet(second).node(node).cordon.reason == "before the rotation"
    await services.stop(second)

    third = await services.start(make_config(f"c3-{tag}", MYOLO_SIGNING_KEY_FILE=str(new)), clock)
    found = fleet(third).node(node)
    assert found is not None and found.cordoned and found.cordon.reason == "before the rotation"
