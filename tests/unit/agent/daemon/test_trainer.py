"""The supervisor inside the real daemon (``serve`` on a simulated clock, commands from memory), with the fake
worker as the trainer: the start is acked with pids, the samples list the workers on their simulated GPUs, a
drain stops them, a reload changes the hang rule of a running job, and the daemon's stop leaves no worker."""

from __future__ import annotations

import asyncio
import fnmatch
import sys

import pytest

from myolo.agent.daemon.reload import reload_config
from myolo.agent.daemon.trainer import nccl_globs
from myolo.events.payloads import CommandAck, NodeSample
from tests.support.helpers import pid_gone, wait_until
from tests.unit.agent.daemon.test_commands import Node
from tests.unit.agent.daemon.test_main import play
from tests.unit.agent.trainer.conftest import FAKE

pytestmark = pytest.mark.usefixtures("stop_nodes")  # a failed test leaves no daemon running

TOML = f"[trainer]\npython = ['{sys.executable}', '{FAKE}']\nhang_floor_s = 60.0\nterm_grace_s = 2.0\n"
START = {
    "job_id": "j1",
    "generation": 0,
    "node_rank": 0,
    "nnodes": 1,
    "gpus": [1],
    "master_addr": "127.0.0.1",
    "master_port": 29500,
}


async def final(node: Node, command_id: str) -> CommandAck:
    async def outcome() -> bool:
        await play(node.clock, 0.5, 0.25)
        return any(a.status != "accepted" for a in node.acks(command_id))

    await wait_until(outcome, 30, f"the outcome of {command_id}")
    return next(a for a in node.acks(command_id) if a.status != "accepted")


async def test_the_daemon_starts_shows_drains_and_reconfigures_workers(short_dir, monkeypatch) -> None:
    monkeypatch.setenv("FAKE", "forever")
    node = Node(short_dir, toml=TOML)
    await node.start()
    await play(node.clock, 1.0, 0.5)
    await node.send("s1", "start_workers", **START)
    ack = await final(node, "s1")
    assert ack.status == "done", ack
    pid = ack.result["pids"]["0"]

    async def sample_shows_worker() -> bool:
        await play(node.clock, 1.0, 0.5)
        samples = [e.data for _, e in node.broker.events if isinstance(e.data, NodeSample) and e.data.workers]
        return bool(samples) and samples[-1].workers[0].state == "running"

    await wait_until(sample_shows_worker, 30, "a sample with the running worker")
    sample = [e.data for _, e in node.broker.events if isinstance(e.data, NodeSample) and e.data.workers][-1]
    (worker,) = sample.workers
    assert (worker.job_id, worker.rank, worker.gpu, worker.pid) == ("j1", 0, 1, pid)
    assert [p.pid for p in sample.gpus[1].processes or []] == [pid]  # on its simulated GPU
    assert pid not in [p.pid for p in sample.gpus[0].processes or []]

    async def its_gpu_is_busy() -> bool:  # the simulated GPU's utilisation rises (2 s lag) once the worker runs
        await play(node.clock, 1.0, 0.5)
        last = [e.data for _, e in node.broker.events if isinstance(e.data, NodeSample)][-1]
        return (last.gpus[1].util_gpu or 0.0) > 50 and (last.gpus[0].util_gpu or 0.0) < 50

    await wait_until(its_gpu_is_busy, 30, "the worker's GPU busy, the other idle")

    plan = node.rt.trainer.jobs["j1"].workers[0].plan  # type: ignore[union-attr]
    assert plan.env["NCCL_DEBUG"] == "INFO" and plan.env["NCCL_DEBUG_FILE"] == str(plan.nccl_log)
    assert any(fnmatch.fnmatch(str(plan.nccl_log), g) for g in nccl_globs(node.rt))  # the NCCL follower reads it
    assert (plan.env["RANK"], plan.env["WORLD_SIZE"], plan.env["LOCAL_RANK"], plan.env["CUDA_VISIBLE_DEVICES"]) == (
        "0",
        "1",
        "0",
        "",
    )

    (short_dir / "agent.toml").write_text(
        (short_dir / "agent.toml").read_text().replace("hang_floor_s = 60.0", "hang_floor_s = 7.0")
    )
    node.rt.config_path = str(short_dir / "agent.toml")
    assert reload_config(node.rt)
    assert node.rt.trainer is not None and node.rt.trainer.jobs["j1"].watch.floor_s == 7.0  # the running job too

    await node.send("d1", "drain", reason="maintenance")
    drained = await final(node, "d1")
    assert drained.status == "done" and drained.result["draining"] is True
    (stopped,) = drained.result["stopped"]
    assert stopped["job_id"] == "j1" and stopped["asked_to_checkpoint"] is True and stopped["exit_codes"] == {"0": 0}
    assert pid_gone(pid)

    await node.send("s2", "start_workers", **{**START, "generation": 1})  # a draining node takes no new work
    refused = await final(node, "s2")
    assert refused.status == "rejected" and "draining" in (refused.reason or "")
    assert await node.stop() == 0


async def test_the_daemons_stop_leaves_no_worker(short_dir, monkeypatch) -> None:
    monkeypatch.setenv("FAKE", "stubborn")  # ignores SIGTERM: the stop ends in SIGKILL
    node = Node(short_dir, toml=TOML)
    await node.start()
    await node.send("s1", "start_workers", **START)
    pid = (await final(node, "s1")).result["pids"]["0"]
    task = asyncio.ensure_future(node.stop())
    while not task.done():
        await play(node.clock, 5.0, 0.5)  # the stop waits on the agent's clock: stop timeout, then grace
    assert task.result() == 0
    assert pid_gone(pid)
