"""The node key: ``[identity] key_file`` defaults to <data_dir>/node.key, made at the first start (0600, .pub
beside it) and refused when others can read it; the publisher signs the node events that make the coordinator
act as it spools them (faults, acks, training faults and completions, samples reporting warn or fail health),
and nothing else."""

from __future__ import annotations

import stat
from pathlib import Path

import msgspec
import pytest

from myolo.agent.config import load_agent_config
from myolo.agent.daemon.assemble import build_runtime
from myolo.agent.notify import Notifier
from myolo.agent.publish import Publisher
from myolo.agent.spool import Spool
from myolo.common.clock import SimClock
from myolo.common.errors import ConfigError
from myolo.common.keys import Ed25519Signer, load_verify_key
from myolo.events.codec import decode
from myolo.events.examples import example_payloads
from myolo.events.signing import SIG, SIGNED_NODE_EVENTS, verify_with
from tests.unit.agent.daemon.test_main import FakeBroker

AGENT_EVENTS = [
    "ai.myolo.node.sample.v1",
    "ai.myolo.node.fault.v1",
    "ai.myolo.nccl.report.v1",
    "ai.myolo.nccl.bandwidth.v1",
    "ai.myolo.memory.leak.v1",
    "ai.myolo.training.progress.v1",
    "ai.myolo.training.fault.v1",
    "ai.myolo.training.completed.v1",
    "ai.myolo.command.ack.v1",
]


def test_the_node_key_defaults_to_the_data_dir_and_is_made_once(tmp_path: Path) -> None:
    cfg = load_agent_config(None, env={"MYOLO_DATA_DIR": str(tmp_path), "MYOLO_NODE_ID": "n1"})
    assert cfg.identity.key_file == str(tmp_path / "node.key")
    clock = SimClock()
    rt = build_runtime(cfg, clock, producer_factory=FakeBroker().factory(), notifier=Notifier(None))
    signer = rt.publisher.signer
    assert isinstance(signer, Ed25519Signer)
    assert stat.S_IMODE((tmp_path / "node.key").stat().st_mode) == 0o600
    assert load_verify_key(tmp_path / "node.key.pub", "k").key_id == signer.key_id
    rt.publisher.spool.close()
    again = build_runtime(cfg, clock, producer_factory=FakeBroker().factory(), notifier=Notifier(None))
    assert again.publisher.signer.key_id == signer.key_id  # the same identity across restarts
    again.publisher.spool.close()
    elsewhere = load_agent_config(None, env={"MYOLO_DATA_DIR": str(tmp_path), "MYOLO_IDENTITY_KEY_FILE": "~/n.key"})
    assert elsewhere.identity.key_file == str(Path.home() / "n.key")


def test_a_node_key_others_can_read_fails_the_start_naming_it(tmp_path: Path) -> None:
    cfg = load_agent_config(None, env={"MYOLO_DATA_DIR": str(tmp_path)})
    build_runtime(
        cfg, SimClock(), producer_factory=FakeBroker().factory(), notifier=Notifier(None)
    ).publisher.spool.close()
    (tmp_path / "node.key").chmod(0o644)
    with pytest.raises(ConfigError, match=r"identity\.key_file: .*accessible by others.*chmod 600"):
        build_runtime(cfg, SimClock(), producer_factory=FakeBroker().factory(), notifier=Notifier(None))


def test_the_events_that_cause_action_are_signed_in_the_spool_and_telemetry_is_not(tmp_path: Path) -> None:
    assert {"ai.myolo.node.fault.v1", "ai.myolo.command.ack.v1"} <= SIGNED_NODE_EVENTS
    assert set(AGENT_EVENTS) >= SIGNED_NODE_EVENTS
    node = Ed25519Signer.generate()
    clock = SimClock()
    spool = Spool(tmp_path / "spool", max_bytes=1 << 20, segment_bytes=1 << 16, fsync="never", clock=clock)
    pub = Publisher(spool, FakeBroker().factory(), source="/myolo/agent/n1", node_id="n1", clock=clock, signer=node)
    payloads = example_payloads()
    for kind in AGENT_EVENTS:
        pub.publish(payloads[kind])
    spooled = [decode(e.record.value, e.record.headers, e.record.key) for e in spool.peek(100)]
    assert [e.type for e in spooled] == AGENT_EVENTS
    for event in spooled:
        if event.type in SIGNED_NODE_EVENTS:
            verify_with(event, node.public, event.type)  # as it will be sent, whenever that is
        else:
            assert SIG not in event.extensions and getattr(event.data, "health", "ok") == "ok"
    # a sample that reports bad health can make the coordinator cordon the node: signed too
    for health in ("warn", "fail"):
        pub.publish(msgspec.structs.replace(payloads["ai.myolo.node.sample.v1"], health=health))
    unhealthy = [decode(e.record.value, e.record.headers, e.record.key) for e in spool.peek(100)][-2:]
    assert [e.data.health for e in unhealthy] == ["warn", "fail"]
    for event in unhealthy:
        verify_with(event, node.public, event.type)
    spool.close()
