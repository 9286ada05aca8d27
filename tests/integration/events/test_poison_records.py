"""One record must never stop a consumer: hostile records, written with kcat against real processes.

Two ``myolo-coordinator run`` processes: a 6 KB structured CloudEvent whose data is 3,000 nested arrays on
myolo.node.faults, a 2 KB binary-mode ack nesting 1,000 arrays on myolo.command.acks and an ack with a
100 KB id are dead-lettered by both (read back from myolo.deadletter with their reasons); both keep serving
their HTTP API, a leader is still known, and a FAIL fault written after the poison on the same partition
still cordons its node (signed by the node's key, enrolled over the API as an admin does; the poison is not
signed at all, and is dead-lettered for its shape before any signature is looked at). A ``myolo-agent run`` process with commands enabled dead-letters such records on
myolo.commands and goes on executing signed commands. Only the processes' public surfaces are used.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from myolo.common.keys import Ed25519Signer, load_signer
from myolo.events.bus import EventProducer
from myolo.events.deadletter import dead_letter_info
from myolo.events.examples import node_sample
from myolo.events.payloads import Command, NodeFault
from myolo.events.topics import COMMAND_ACKS, COMMANDS, DEAD_LETTER, NODE_FAULTS, NODE_SAMPLES
from tests.support.agent.agent_proc import AgentProc
from tests.support.agent.agent_proc import read_topic as agent_events
from tests.support.api_auth import ADMIN, VIEWER, write_tokens
from tests.support.coordinator.identity import enroll_over_api, signed_structured
from tests.support.coordinator.procs import one_settled_leader, status
from tests.support.helpers import kcat, new_ed25519_key, read_topic, structured, wait_until, write_key

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[3]
TOO_DEEP = "nests deeper than 32 levels of arrays and objects; the limit is 32"


def nested_structured(node: str, depth: int = 3000) -> bytes:
    """A structured fault whose data is ``depth`` nested JSON arrays (6 KB for 3,000)."""
    doc = structured(NodeFault(node_id=node, kind="xid", health="fail"))
    return doc[: doc.index(b'"data":') + len(b'"data":')] + b"[" * depth + b"]" * depth + b"}"


def binary_headers(type_: str, event_id: str) -> dict[str, str]:
    return {
        "ce_specversion": "1.0",
        "ce_id": event_id,
        "ce_source": "ext/kcat",
        "ce_type": type_,
        "content-type": "application/json",
    }


def nested_ack(node: str, depth: int = 1000) -> bytes:
    """A binary-mode ack whose ``result`` nests ``depth`` arrays (2 KB for 1,000)."""
    head = f'{{"command_id":"c-1","node_id":"{node}","epoch":1,"status":"done","result":{{"r":'.encode()
    return head + b"[" * depth + b"]" * depth + b"}}"


HUGE_ID = "id is 100000 bytes; the limit is 256"


def poison(bootstrap: str, node: str, structured_topic: str, binary_topic: str, binary_type: str) -> None:
    """Write the poison records, keyed by ``node``: each is dead-lettered with the limit it broke."""
    kcat(bootstrap, structured_topic, node, nested_structured(node))
    kcat(bootstrap, binary_topic, node, nested_ack(node), binary_headers(binary_type, f"deep-{uuid.uuid4().hex}"))
    kcat(bootstrap, binary_topic, node, b"{}", binary_headers(binary_type, "i" * 100_000))


async def poll(cond: Callable[[], Any], timeout: float, what: str) -> None:
    """Poll a condition on other processes or the broker (sync or async) twice a second, with a deadline."""
    await wait_until(cond, timeout, what, every=0.5)


async def letters_for(settings: Any, key: str) -> list[dict[str, str]]:
    return [dead_letter_info(r.headers) for r in await read_topic(settings, DEAD_LETTER) if r.key == key.encode()]


def get(url: str, path: str, token: str) -> tuple[int, Any]:
    request = urllib.request.Request(f"{url}{path}", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())
    except OSError:
        return 0, None


class Coordinators:
    """``myolo-coordinator run`` processes, each with its own config, API port and log."""

    def __init__(self, tmp: Path, bootstrap: str, n: int = 2) -> None:
        tag = uuid.uuid4().hex[:6]
        key = tmp / "coordinator.key"
        new_ed25519_key(key)
        self.tmp, self.n, self.procs = tmp, n, []
        self.tokens = write_tokens(tmp / "api-tokens")  # the API authenticates every caller (tests/support/api_auth.py)
        self.status_files = [tmp / f"c{i}.status.json" for i in range(n)]
        for i, status_file in enumerate(self.status_files):
            (tmp / f"c{i}.toml").write_text(
                f'instance_id = "poison-{i}-{tag}"\ntick_s = 0.2\nstatus_file = "{status_file}"\n'
                f'[kafka]\nbootstrap = "{bootstrap}"\n[signing]\nkey_file = "{key}"\n'
                f'[leader]\ngroup_id = "poison-{tag}"\n[api]\nport = 0\ntokens_file = "{tmp / "api-tokens"}"\n'
            )

    def urls(self) -> list[str | None]:
        """Each API's URL: a coordinator binds port 0 and writes the URL it got in its status file."""
        return [(status(path) or {}).get("api_url") for path in self.status_files]

    def start(self) -> None:
        for i in range(self.n):
            log = (self.tmp / f"c{i}.log").open("w")
            args = [
                sys.executable,
                "-m",
                "myolo.coordinator.cli_daemon",
                "run",
                "--config",
                str(self.tmp / f"c{i}.toml"),
            ]
            self.procs.append(subprocess.Popen([*args, "--log-json"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))

    def get_all(self, path: str, who: str = VIEWER) -> list[tuple[int, Any]]:
        return [get(url, path, self.tokens[who]) if url else (0, None) for url in self.urls()]

    def trust(self, node_id: str) -> bool:
        """Both coordinators know the node's enrolled key (read back from the state topic by the standby)."""
        answers = self.get_all("/v1/node-keys", ADMIN)
        return all(code == 200 and any(k["node_id"] == node_id for k in body["items"]) for code, body in answers)

    def settled(self) -> bool:
        """Both serve, one leads, and the leader group is stable (no member still joining to move it)."""
        return one_settled_leader([status(path) for path in self.status_files]) and self.serving_with_one_leader()

    def serving_with_one_leader(self) -> bool:
        health = self.get_all("/healthz")
        leaders = self.get_all("/v1/leader")
        if any(code != 200 for code, _ in health + leaders):
            return False
        known = {body["leader_id"] for _, body in leaders}
        roles = sorted(body["role"] for _, body in health)
        return roles == ["leader", "standby"] and len(known) == 1 and None not in known

    def node(self, node_id: str) -> list[dict | None]:
        return [body if code == 200 else None for code, body in self.get_all(f"/v1/nodes/{node_id}")]

    def logs(self) -> str:
        return "\n".join(f"---- c{i} ----\n{(self.tmp / f'c{i}.log').read_text()[-3000:]}" for i in range(self.n))

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


async def test_poison_records_stop_no_coordinator(kafka, settings, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    node = f"poison-node-{tag}"
    coords = Coordinators(tmp_path, kafka.bootstrap)
    coords.start()
    try:
        await poll(coords.settled, 90, "both coordinators serving, one leading in a settled group")

        def both_see_node() -> bool:
            kcat(kafka.bootstrap, NODE_SAMPLES, node, structured(node_sample(node, gpus=2)))
            return all(coords.node(node))

        # they read from "latest": a sample seen by both means their ingest is assigned and reading
        await poll(both_see_node, 90, "both coordinators reading the samples")
        node_key = Ed25519Signer.generate()
        await enroll_over_api([u for u in coords.urls() if u], {node: node_key}, coords.tokens[ADMIN])
        await poll(lambda: coords.trust(node), 30, "both coordinators trusting the node's key")
        poison(kafka.bootstrap, node, NODE_FAULTS, COMMAND_ACKS, "ai.myolo.command.ack.v1")
        fault = NodeFault(node_id=node, kind="xid", health="fail", xid=79, gpu_index=1, reasons=["xid 79"])
        kcat(kafka.bootstrap, NODE_FAULTS, node, signed_structured(fault, node_key))  # after the poison

        found: list[dict[str, str]] = []

        async def all_dead_lettered() -> bool:
            found[:] = [i for i in await letters_for(settings, node) if i["topic"] in (NODE_FAULTS, COMMAND_ACKS)]
            return len(found) >= 6

        await poll(all_dead_lettered, 90, "three dead letters from each coordinator")
        await poll(lambda: all(n and n["cordoned"] for n in coords.node(node)), 60, "the fault after the poison")
        assert all("FAIL" in n["cordon"]["reason"] for n in coords.node(node)), coords.node(node)
        assert all(p.poll() is None for p in coords.procs), "no coordinator stopped"
        assert coords.serving_with_one_leader(), "both still serve, and a leader is known"
        assert all(
            code == 200 and any(n["node_id"] == node for n in body["items"])
            for code, body in coords.get_all("/v1/nodes")
        )
    except BaseException:
        print(coords.logs())
        raise
    finally:
        coords.stop()

    assert len({i["group"] for i in found}) == 2, "each coordinator dead-lettered them"
    assert sorted((i["topic"], i["field"], i["reason"]) for i in found) == sorted(
        [(NODE_FAULTS, "value", TOO_DEEP), (COMMAND_ACKS, "data", TOO_DEEP), (COMMAND_ACKS, "header ce_id", HUGE_ID)]
        * 2
    )


async def test_an_agent_goes_on_executing_commands_after_poison(settings, kafka, tmp_path: Path) -> None:
    key_file = write_key(tmp_path / "coordinator.key")  # a legacy HMAC secret: agents still accept one
    agent = AgentProc(kafka.bootstrap, extra_toml=f'[commands]\nenabled = true\nkey_files = ["{key_file}"]\n')

    async def done(command_id: str) -> bool:
        acks = [e.data for e in await agent_events(settings, COMMAND_ACKS, agent.node_id)]
        return any(a.command_id == command_id and a.status == "done" for a in acks)

    async with EventProducer(settings, source="/myolo/coordinator/it", signer=load_signer(key_file)) as leader:
        try:
            await agent.start()
            await poll(lambda: "READY" in agent.kinds(), 60, "the agent ready")
            await leader.send(Command(command_id="before", node_id=agent.node_id, epoch=1, action="report_sample"))
            await poll(lambda: done("before"), 60, "a command executed before the poison")

            poison(kafka.bootstrap, agent.node_id, COMMANDS, COMMANDS, "ai.myolo.command.v1")
            await leader.send(Command(command_id="after", node_id=agent.node_id, epoch=1, action="report_sample"))
            await poll(lambda: done("after"), 60, "a command executed after the poison")
            assert agent.proc is not None and agent.proc.poll() is None
            code, body = await asyncio.to_thread(agent.health)
            assert code == 200, body

            found: list[dict[str, str]] = []

            async def dead_lettered() -> bool:
                found[:] = [i for i in await letters_for(settings, agent.node_id) if i["topic"] == COMMANDS]
                return len(found) >= 3

            await poll(dead_lettered, 60, "the poison commands dead-lettered")
            assert sorted((i["field"], i["reason"]) for i in found) == sorted(
                [("value", TOO_DEEP), ("data", TOO_DEEP), ("header ce_id", HUGE_ID)]
            )
            agent.signal(signal.SIGTERM)
            assert await asyncio.to_thread(agent.proc.wait, 30) == 0
            assert "Traceback" not in agent.log_text()
        except BaseException:
            print(agent.log_text()[-5000:])
            raise
        finally:
            await agent.cleanup()
