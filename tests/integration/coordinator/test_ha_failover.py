"""High availability with real processes and the real broker.

Two ``myolo-coordinator run`` processes, a simulated agent (``myolo-agent run --simulate-gpus``) and the
agent's real command executor. A node goes Suspect, so the leader sends it a command while the executor is
paused (the command stays unacknowledged); then the leader is killed with SIGKILL. The standby must lead
with a higher epoch, hold the same fleet view, resend the pending command with the same id, and the node must
execute it exactly once. A command carrying the dead leader's epoch is then rejected. (How fast the standby
takes over is printed, not asserted: the wait's deadline is a hang guard.)
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

from myolo.common.keys import load_signer
from myolo.events.bus import EventProducer
from myolo.events.codec import decode
from myolo.events.payloads import Command, CommandAck
from myolo.events.topics import COMMAND_ACKS
from tests.integration.coordinator.conftest import read_topic, wait_until
from tests.support.coordinator.identity import enroll_over_api
from tests.support.coordinator.procs import Procs, one_settled_leader, status
from tests.support.helpers import new_ed25519_key


def view(st: dict) -> dict:
    """What must be the same on every coordinator: nodes, their GPUs, health and cordons."""
    return {
        n["node_id"]: (n.get("health"), len(n.get("gpus", [])), json.dumps(n.get("cordon"), sort_keys=True))
        for n in st["nodes"]
    }


def settled_fleet(leader: dict | None, standby: dict | None) -> bool:
    """Every node is either heard right now or Lost and cordoned, and both coordinators agree on the fleet.

    The shared broker holds nodes of earlier tests. A coordinator that replays them counts their silence from
    its own start, so they show Ready for a few seconds, then Suspect, then Lost (and the leader cordons them).
    Until that has played out, a failover races it."""
    if leader is None or standby is None:
        return False
    for n in leader["nodes"]:
        cordoned = bool((n.get("cordon") or {}).get("cordoned"))
        last_seen, interval = n.get("last_seen"), n.get("sample_interval_s") or 1.0
        heard = last_seen is not None and leader["time"] - last_seen <= 2.5 * interval
        if not ((n["liveness"] == "Ready" and heard) or (n["liveness"] == "Lost" and cordoned)):
            return False
    return view(leader) == view(standby)


async def test_kill_leader_standby_takes_over(kafka, settings, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    node = f"ha-node-{tag}"
    key = tmp_path / "coordinator.key"
    new_ed25519_key(key)
    executed = tmp_path / "executed.log"
    executed.touch()
    procs = Procs(tmp_path)
    files = {}
    for name in ("a", "b"):
        files[name] = tmp_path / f"status-{name}.json"
        (tmp_path / f"{name}.toml").write_text(
            f'instance_id = "ha-{name}-{tag}"\ntick_s = 0.2\nstatus_file = "{files[name]}"\n'
            f'[kafka]\nbootstrap = "{kafka.bootstrap}"\n[signing]\nkey_file = "{key}"\n'
            f'[leader]\ngroup_id = "ha-{tag}"\n[api]\nport = 0\nauth = "none"\n[commands]\nretry_after_s = 1.0\n'
        )
    try:
        state_dir = tmp_path / "executor"
        state_dir.mkdir()
        procs.start(
            "executor",
            [
                "-m",
                "tests.support.coordinator.ha_executor",
                "--node",
                node,
                "--key",
                f"{key}.pub",  # an agent holds the public half only
                "--state-dir",
                str(state_dir),
                "--log",
                str(executed),
                "--bootstrap",
                kafka.bootstrap,
                "--node-key",  # one node: the executor acks with the key its agent signs with
                str(tmp_path / "agent" / "node.key"),
            ],
        )
        await wait_until(lambda: (state_dir / "ready").exists(), 60, "executor ready")
        procs.start_agent("agent", node, kafka.bootstrap, tmp_path / "agent", gpus=2)
        for name in ("a", "b"):
            procs.start(
                f"coord-{name}",
                ["-m", "myolo.coordinator.cli_daemon", "run", "--config", str(tmp_path / f"{name}.toml")],
            )

        def settled() -> bool:
            sts = [status(files[n]) for n in ("a", "b")]
            ready = [s for s in sts if s and any(n["node_id"] == node and n["liveness"] == "Ready" for n in s["nodes"])]
            return one_settled_leader(sts) and len(ready) == len(sts)

        await wait_until(settled, 90, "one leader, both coordinators seeing the node")
        sts = {n: status(files[n]) for n in ("a", "b")}
        # the node's key, enrolled as an admin does, so its signed acks are taken
        await enroll_over_api(
            [st["api_url"] for st in sts.values()], {node: (tmp_path / "agent" / "node.key.pub").read_text()}
        )
        leader = next(n for n in sts if sts[n]["is_leader"])
        standby = "b" if leader == "a" else "a"
        e1 = sts[leader]["epoch"]
        assert e1 >= 1 and sts[standby]["epoch"] is None
        # the shared broker also holds nodes of earlier tests, silent since: wait until the leader has seen each
        # of them Lost and cordoned it, or the kill below could race that and the new leader would do it instead
        await wait_until(lambda: settled_fleet(status(files[leader]), status(files[standby])), 30, "the fleet settled")

        # the node goes quiet (Suspect): the leader asks it for a sample; the executor is paused, so no ack
        procs.signal("executor", signal.SIGSTOP)
        procs.signal("agent", signal.SIGSTOP)

        def pending_on(st: dict | None) -> list[dict]:
            return [c for c in (st or {}).get("commands", []) if c["node_id"] == node and c["status"] == "pending"]

        await wait_until(lambda: pending_on(status(files[standby])), 30, "a command intent, seen by the standby too")
        procs.signal("agent", signal.SIGCONT)
        cmd = pending_on(status(files[standby]))[0]
        assert cmd["action"] == "report_sample" and cmd["epoch"] == e1
        await wait_until(
            lambda: any(n["node_id"] == node and n["liveness"] == "Ready" for n in status(files[standby])["nodes"]),
            30,
            "node back",
        )
        before = view(status(files[leader]))
        assert view(status(files[standby])) == before

        # kill -9 the leader
        t0 = time.monotonic()
        procs.signal(f"coord-{leader}", signal.SIGKILL)
        await wait_until(lambda: (status(files[standby]) or {}).get("is_leader"), 30, "the standby leading")
        print(f"failover took {time.monotonic() - t0:.1f} s")
        st = status(files[standby])
        e2 = st["epoch"]
        assert e2 > e1
        assert view(st) == before

        # the new leader resends the unfinished command: same id, its own epoch; the node runs it once
        def resent() -> bool:
            return any(
                c["command_id"] == cmd["command_id"] and c["epoch"] == e2 for c in status(files[standby])["commands"]
            )

        await wait_until(resent, 30, "the pending command resent in the new epoch")
        procs.signal("executor", signal.SIGCONT)

        def finished() -> bool:
            return any(
                c["command_id"] == cmd["command_id"] and c["status"] in ("done", "duplicate")
                for c in status(files[standby])["commands"]
            )

        await wait_until(finished, 60, "the command acknowledged as done")

        async def acked(command_id: str, status: str) -> CommandAck | None:
            for k, v, h in await read_topic(settings, COMMAND_ACKS):
                if k == node:
                    ack = decode(v, h, k.encode()).data
                    if ack.command_id == command_id and ack.status == status:
                        return ack
            return None

        signer = load_signer(key)
        # A later command of the same action, in the new leader's epoch. The node takes commands in the order
        # they reach it and runs those of one action one at a time, in that order: once the later one is done,
        # every copy of the resent command that reached the node before it has run or been refused, so a
        # wrong repeat would be in the log by now. (The leader resends nothing once it has the ack.)
        later = Command(command_id=uuid.uuid4().hex, node_id=node, epoch=e2, action="report_sample")
        async with EventProducer(settings, source="later", signer=signer) as p:
            await p.send(later)
        await wait_until(lambda: acked(later.command_id, "done"), 60, "a later command done", every=0.5)
        runs = Counter(line.split()[0] for line in executed.read_text().splitlines())
        assert runs[cmd["command_id"]] == 1 and runs[later.command_id] == 1
        assert all(count == 1 for count in runs.values()), runs

        # a command with the dead leader's epoch (a zombie leader) is rejected by the agent
        zombie = Command(command_id=uuid.uuid4().hex, node_id=node, epoch=e1, action="report_sample")
        async with EventProducer(settings, source="zombie", signer=signer) as p:
            await p.send(zombie)
        await wait_until(lambda: acked(zombie.command_id, "rejected"), 60, "the zombie's command rejected", every=0.5)
        ack = await acked(zombie.command_id, "rejected")
        assert ack is not None and "stale epoch" in (ack.reason or "")
        assert zombie.command_id not in executed.read_text()
    except BaseException:
        for name in procs.running:
            print(f"---- {name} ----\n{procs.tail(name)}")
        raise
    finally:
        procs.stop_all()
