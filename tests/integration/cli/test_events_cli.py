"""`myoloctl events produce|tail|validate` as a user runs them, against the real broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import msgspec

from myolo.events.codec import encode_structured
from myolo.events.envelope import new_event
from myolo.events.examples import example_payloads, node_sample

MYOLOCTL = [sys.executable, "-m", "myolo.coordinator.cli.main"]


def myoloctl(*args: str, bootstrap: str | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {"MYOLO_KAFKA_BOOTSTRAP": bootstrap} if bootstrap else {}
    return subprocess.run(
        [*MYOLOCTL, *args], input=stdin, capture_output=True, timeout=120, env={**os.environ, **env}, check=False
    )


def test_validate_accepts_and_rejects(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_bytes(encode_structured(new_event(node_sample(gpus=2), "ext/x")))
    result = myoloctl("events", "validate", str(good))
    assert result.returncode == 0, result.stderr
    assert b"valid: ai.myolo.node.sample.v1" in result.stdout

    doc = msgspec.json.decode(good.read_bytes())
    doc["data"]["gpus"][1]["util_gpu"] = 140
    bad = tmp_path / "bad.json"
    bad.write_bytes(msgspec.json.encode(doc))
    result = myoloctl("events", "validate", str(bad))
    assert result.returncode == 2
    assert b"data.gpus[1].util_gpu" in result.stderr
    assert len(result.stderr.decode().strip().splitlines()) == 1  # one line, the reason

    result = myoloctl("events", "validate", "-", stdin=b"not json")
    assert result.returncode == 2 and b"not valid JSON" in result.stderr


def test_produce_then_tail(kafka, tmp_path: Path) -> None:
    node = f"cli-{uuid.uuid4().hex[:6]}"
    payload = tmp_path / "fault.json"
    fault = msgspec.to_builtins(example_payloads()["ai.myolo.node.fault.v1"])
    fault["node_id"] = node
    payload.write_bytes(msgspec.json.encode(fault))
    topic = "myolo.node.faults"
    sent = myoloctl(
        "events",
        "produce",
        topic,
        "--type",
        "ai.myolo.node.fault.v1",
        "--data",
        f"@{payload}",
        bootstrap=kafka.bootstrap,
    )
    assert sent.returncode == 0, sent.stderr
    assert b"sent ai.myolo.node.fault.v1" in sent.stdout

    tail = myoloctl(
        "events", "tail", topic, "--from-beginning", "--idle-timeout", "3", "-o", "json", bootstrap=kafka.bootstrap
    )
    assert tail.returncode == 0, tail.stderr
    rows = [json.loads(line) for line in tail.stdout.decode().splitlines()]
    mine = [r for r in rows if r.get("key") == node]
    assert len(mine) == 1
    assert mine[0]["data"]["xid"] == 79 and mine[0]["type"] == "ai.myolo.node.fault.v1"

    table = myoloctl("events", "tail", topic, "--from-beginning", "--max", "1", bootstrap=kafka.bootstrap)
    assert table.returncode == 0 and b"ai.myolo.node.fault.v1" in table.stdout


def test_produce_rejects_invalid_payloads_before_sending(kafka, tmp_path: Path) -> None:
    bad = msgspec.to_builtins(example_payloads()["ai.myolo.node.fault.v1"])
    del bad["health"]
    result = myoloctl(
        "events",
        "produce",
        "myolo.node.faults",
        "--type",
        "ai.myolo.node.fault.v1",
        "--data",
        "-",
        bootstrap=kafka.bootstrap,
        stdin=msgspec.json.encode(bad),
    )
    assert result.returncode == 2
    assert b"data.health" in result.stderr and b"missing required field" in result.stderr
    wrong_topic = myoloctl(
        "events",
        "produce",
        "myolo.commands",
        "--type",
        "ai.myolo.node.fault.v1",
        "--data",
        msgspec.json.encode(example_payloads()["ai.myolo.node.fault.v1"]).decode(),
        bootstrap=kafka.bootstrap,
    )
    assert wrong_topic.returncode == 2 and b"does not belong on topic" in wrong_topic.stderr
    unknown = myoloctl(
        "events",
        "produce",
        "myolo.node.faults",
        "--type",
        "ai.myolo.node.fault.v9",
        "--data",
        "{}",
        bootstrap=kafka.bootstrap,
    )
    assert unknown.returncode == 2 and b"unsupported version" in unknown.stderr
