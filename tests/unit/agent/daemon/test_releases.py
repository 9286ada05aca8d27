"""Signed upgrade and rollback commands through the daemon's executor (the real ``serve`` on a simulated
clock, commands from memory, a fake broker), installing real wheels. The restart itself is not run here: the
daemon stops as on SIGTERM and leaves ``rt.restart`` for ``myolo-agent run`` (test_restart covers it)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from myolo.agent.daemon import status
from myolo.agent.releases import RestartPlan
from myolo.events.payloads import CommandAck
from tests.support.agent.wheels import build_wheel, sha256_of
from tests.support.helpers import wait_until
from tests.unit.agent.daemon.test_commands import Node
from tests.unit.agent.daemon.test_main import play

pytestmark = pytest.mark.usefixtures("stop_nodes")


def node(d: Path) -> Node:
    return Node(d, toml=f"[releases]\ndir = '{d / 'releases'}'\nrestart = 'exec'\nkeep = 2\n")


async def final(n: Node, command_id: str) -> CommandAck:
    """The command's last ack once it is final (an install runs pip in real time)."""
    await wait_until(
        lambda: any(a.status != "accepted" for a in n.acks(command_id)), timeout=60, what=f"{command_id} finished"
    )
    return n.acks(command_id)[-1]


async def test_an_agent_upgrade_is_acked_done_then_the_daemon_stops_cleanly_to_restart(short_dir) -> None:
    n = node(short_dir)
    wheel = build_wheel(short_dir / "dist", "5.0.1")
    await n.start()
    await play(n.clock, 2.0, 0.5)

    await n.send("u1", "upgrade", component="agent", version="5.0.1", artifact=str(wheel), sha256=sha256_of(wheel))
    ack = await final(n, "u1")
    assert [a.status for a in n.acks("u1")] == ["accepted", "done"], ack.reason
    releases = short_dir / "releases" / "agent"
    assert ack.result == {
        "component": "agent",
        "version": "5.0.1",
        "previous": n.rt.version,  # the base install this agent runs
        "path": str(releases / "5.0.1"),
        "sha256": sha256_of(wheel),
        "installed": True,
        "pruned": [],
        "restart": "exec",
    }
    assert os.readlink(releases / "current") == "5.0.1"
    # the daemon stops on its own once the ack is spooled: as on SIGTERM, the ack flushed with the spool
    assert await asyncio.wait_for(n.task, 20) == 0
    assert n.rt.restart == RestartPlan(
        mode="exec", release=str(releases / "current"), version="5.0.1", reason="upgrade to 5.0.1"
    )
    assert n.sources[0].stopped and n.rt.publisher.spool.pending == 0


async def test_a_wrong_hash_fails_naming_both_and_the_agent_keeps_running_its_version(short_dir) -> None:
    n = node(short_dir)
    wheel = build_wheel(short_dir / "dist", "5.0.2")
    await n.start()
    await n.send("u2", "upgrade", component="agent", version="5.0.2", artifact=str(wheel), sha256="f" * 64)
    ack = await final(n, "u2")
    assert ack.status == "failed" and sha256_of(wheel) in (ack.reason or "") and "f" * 64 in (ack.reason or "")
    assert not (short_dir / "releases" / "agent" / "current").exists()
    assert n.rt.restart is None and not n.task.done()  # type: ignore[union-attr]
    assert await n.stop() == 0


async def test_commands_that_cannot_run_are_rejected_naming_the_argument(short_dir) -> None:
    n = node(short_dir)
    wheel = build_wheel(short_dir / "dist", "5.0.3")
    await n.start()
    await n.send("r1", "rollback", component="agent", version="4.9")
    await n.send("u3", "upgrade", component="agent", version="5.0.4", artifact=str(wheel), sha256=sha256_of(wheel))
    missing = str(short_dir / "tinyrel-6-py3-none-any.whl")
    await n.send("u4", "upgrade", component="trainer", version="6", artifact=missing, sha256="a" * 64)
    (r1,), (u3,), (u4,) = n.acks("r1"), n.acks("u3"), n.acks("u4")
    assert r1.status == "rejected" and r1.result == {"field": "args.version"}
    assert "agent 4.9 is not installed on this node; installed: none" in (r1.reason or "")
    assert u3.status == "rejected" and "is version 5.0.3, not 5.0.4" in (u3.reason or "")
    assert u4.status == "rejected" and "no such file on this node" in (u4.reason or "")

    n.rt.restart = RestartPlan(mode="exec", release="/r", version="5", reason="upgrade to 5")  # one pending
    await n.send("u5", "upgrade", component="agent", version="5.0.3", artifact=str(wheel), sha256=sha256_of(wheel))
    assert n.acks("u5")[-1].status == "rejected" and "the agent is restarting (upgrade to 5)" in (
        n.acks("u5")[-1].reason or ""
    )
    n.rt.restart = None
    assert await n.stop() == 0


async def test_trainer_upgrades_switch_without_a_restart_and_roll_back_by_version(short_dir) -> None:
    n = node(short_dir)
    wheels = {v: build_wheel(short_dir / "dist", v) for v in ("7.0", "7.1", "7.2")}
    await n.start()
    for i, (version, wheel) in enumerate(wheels.items()):
        args = {"component": "trainer", "version": version, "artifact": wheel.as_uri(), "sha256": sha256_of(wheel)}
        await n.send(f"t{i}", "upgrade", **args)
        ack = await final(n, f"t{i}")
        assert ack.status == "done", ack.reason
        assert ack.result["restart"] is None and ack.result["version"] == version
        if i == 0:  # the base install: what the trainer's interpreter imports (here the agent's own)
            assert ack.result["previous"] == n.rt.version
    releases = short_dir / "releases" / "trainer"
    assert ack.result["previous"] == "7.1" and ack.result["pruned"] == ["7.0"]  # keep = 2
    assert (os.readlink(releases / "current"), os.readlink(releases / "previous")) == ("7.2", "7.1")

    await n.send("tr", "rollback", component="trainer", version="7.1")
    ack = await final(n, "tr")
    assert (ack.status, ack.result) == (
        "done",
        {"component": "trainer", "version": "7.1", "previous": "7.2", "path": str(releases / "7.1"), "restart": None},
    )
    assert os.readlink(releases / "current") == "7.1"
    assert status.current_report(n.rt).checks["commands"].data["releases"] == {"agent": None, "trainer": "7.1"}
    assert n.rt.restart is None and not n.task.done()  # type: ignore[union-attr]
    assert await n.stop() == 0


async def test_an_agent_rollback_to_the_base_install_removes_the_link_and_restarts(short_dir) -> None:
    n = node(short_dir)
    wheel = build_wheel(short_dir / "dist", "5.1")
    await n.start()
    args = {"component": "agent", "version": "5.1", "artifact": str(wheel), "sha256": sha256_of(wheel)}
    await n.send("u", "upgrade", **args, restart=False)  # switch only: the new version runs at the next start
    assert (await final(n, "u")).result["restart"] is None
    assert n.rt.restart is None and not n.task.done()  # type: ignore[union-attr]

    base = n.rt.version
    await n.send("back", "rollback", component="agent", version=base)
    ack = await final(n, "back")
    assert ack.status == "done", ack.reason
    assert ack.result == {"component": "agent", "version": base, "previous": "5.1", "path": None, "restart": "exec"}
    releases = short_dir / "releases" / "agent"
    assert not (releases / "current").exists() and os.readlink(releases / "previous") == "5.1"
    assert await asyncio.wait_for(n.task, 20) == 0
    assert n.rt.restart is not None and n.rt.restart.version == base
