"""Warm standby workers: real processes (``fake_worker.py`` as ``-m myolo.kernels.cli.warm``, taking the handoff with
the real ``myolo.kernels.cli.warm`` code) and the real supervisor."""

from __future__ import annotations

import asyncio
import os
import signal

import msgspec
import pytest

from myolo.agent.trainer.config import TrainerConfig
from myolo.agent.trainer.signals import running_child
from myolo.common.clock import SimClock
from myolo.events.payloads import TrainerJob
from tests.support.helpers import pid_gone, wait_until
from tests.unit.agent.trainer.conftest import start_args


def ready_pids(node) -> set[int]:
    return {s.pid for s in node.sup.warm.standbys if s.ready}


async def tick(node, clock: SimClock, seconds: float) -> None:
    """Move the agent's clock, and wait for the pool's upkeep that it wakes to finish."""
    await wait_until(lambda: clock.pending() > 0, 30, "the pool's upkeep to wait on the clock")
    await clock.advance(seconds)
    await asyncio.sleep(0)
    await wait_until(lambda: not node.sup.warm._lock.locked(), 30, "the pool's upkeep")


async def ready(node, count: int) -> set[int]:
    await wait_until(lambda: len(ready_pids(node)) == count, 30, f"{count} ready standby(s)")
    return ready_pids(node)


async def test_a_ready_standby_becomes_the_worker_and_is_replaced(node_factory, tmp_path) -> None:
    node = await node_factory({"FAKE": "steps:6"}, warm_workers=2)
    standbys = await ready(node, 2)
    result = await node.sup.start(start_args([1, 3]))
    assert result.warm_ranks == [0, 1]
    assert set(result.pids.values()) == standbys
    await wait_until(lambda: node.completions, 30, "the completion")
    done = node.completions[0]
    assert (done.ranks, done.last_step) == ([0, 1], 6)
    assert node.faults == []
    run_dir = tmp_path / "workers" / "j1" / "g0"
    for rank in (0, 1):  # its output went to the rank's log, in the run directory, with the worker's env
        text = (run_dir / f"rank-{rank}.log").read_text()
        assert f"fake standby pid {result.pids[str(rank)]} took rank {rank}" in text
        assert f"fake worker rank {rank} job j1 mode steps:6 cuda='' cwd={run_dir}" in text
    replacements = await ready(node, 2)  # started once the job's workers had stepped
    assert not replacements & standbys
    assert node.sup.warm.stats.handed == 2


async def test_no_ready_standby_means_a_cold_start(node_factory) -> None:
    node = await node_factory({"FAKE": "steps:3", "FAKE_WARM": "slow"}, warm_workers=1)
    await wait_until(lambda: node.sup.warm.standbys, 30, "a standby (still importing)")
    (importing,) = [s.pid for s in node.sup.warm.standbys]
    result = await node.sup.start(start_args([0]))
    assert result.warm_ranks == [] and result.pids["0"] != importing
    await wait_until(lambda: node.completions, 30, "the completion")
    assert node.sup.warm.stats.handed == 0


async def test_a_dead_standby_is_not_used_and_is_replaced(node_factory) -> None:
    clock = SimClock()  # the pool's upkeep runs only when the test moves the clock: take() alone must notice
    node = await node_factory({"FAKE": "steps:3"}, clock=clock, warm_workers=1)
    await tick(node, clock, 1.0)
    (dead,) = await ready(node, 1)
    (standby,) = node.sup.warm.standbys
    os.kill(dead, signal.SIGKILL)
    await wait_until(lambda: not running_child(dead), 30, "the standby to die")
    assert node.sup.warm.standbys == [standby]  # not dropped yet
    result = await node.sup.start(start_args([0]))
    assert result.warm_ranks == [] and result.pids["0"] != dead
    await wait_until(lambda: node.completions, 30, "the completion")
    await tick(node, clock, 1.0)
    (replacement,) = await ready(node, 1)
    assert replacement != dead and pid_gone(dead)
    assert node.faults == [] and node.sup.warm.stats.failed == 0


async def test_a_descendant_holding_the_standbys_stdout_does_not_hold_back_the_workers_exit(
    node_factory, tmp_path
) -> None:
    node = await node_factory({"FAKE": "steps:3", "FAKE_WARM": "child"}, warm_workers=1)
    await ready(node, 1)
    grandchild = int((tmp_path / "workers" / "grandchild.pid").read_text())
    try:
        result = await node.sup.start(start_args([0]))
        assert result.warm_ranks == [0]
        await wait_until(lambda: node.completions, 30, "the completion, while the sleep still runs")
        assert not pid_gone(grandchild)
    finally:
        os.kill(grandchild, signal.SIGKILL)


async def test_compile_jobs_start_cold(node_factory) -> None:
    node = await node_factory({"FAKE": "steps:3"}, warm_workers=1)
    (standby,) = await ready(node, 1)
    args = msgspec.structs.replace(start_args([0]), job=TrainerJob.from_fields({"runtime.compile": True}))
    result = await node.sup.start(args)
    assert result.warm_ranks == [] and result.pids["0"] != standby
    await wait_until(lambda: node.completions, 30, "the completion")
    assert ready_pids(node) == {standby}  # still waiting for a job it can take


async def test_a_warm_worker_that_fails_is_a_fault_with_its_log(node_factory) -> None:
    node = await node_factory({"FAKE_0": "forever", "FAKE_1": "fail:3"}, warm_workers=2)
    await ready(node, 2)
    result = await node.sup.start(start_args([0, 1]))
    assert result.warm_ranks == [0, 1]
    await wait_until(lambda: node.faults and not node.sup.jobs, 30, "the fault and the stop")
    (fault,) = node.faults
    assert (fault.kind, fault.rank, fault.exit_code, fault.pid) == ("worker_exit", 1, 3, result.pids["1"])
    assert "RuntimeError: injected failure" in fault.log_tail


async def test_a_warm_worker_that_ignores_sigterm_is_killed(node_factory) -> None:
    node = await node_factory({"FAKE": "stubborn"}, warm_workers=1, term_grace_s=0.5)
    await ready(node, 1)
    result = await node.sup.start(start_args([2]))
    assert result.warm_ranks == [0]
    await wait_until(lambda: node.progress, 30, "progress")
    stopped = await node.sup.stop("j1", 0, checkpoint=False)
    assert stopped.terminated == [0] and stopped.killed == [0]
    assert stopped.exit_codes == {"0": -signal.SIGKILL}
    assert pid_gone(result.pids["0"])


async def test_close_leaves_no_standby_and_no_worker(node_factory) -> None:
    node = await node_factory({"FAKE": "forever"}, warm_workers=2)
    standbys = await ready(node, 2)
    result = await node.sup.start(start_args([0]))
    await wait_until(lambda: node.progress, 30, "progress")
    await wait_until(lambda: len(node.sup.warm.standbys) == 2, 30, "the replacement standby")
    everyone = standbys | {s.pid for s in node.sup.warm.standbys} | set(result.pids.values())
    assert len(everyone) == 3
    await node.sup.close()
    await wait_until(lambda: all(pid_gone(p) for p in everyone), 30, "every process to be gone")
    assert node.sup.warm.standbys == []
    await node.sup.warm.reconcile(2)  # a closed pool starts nothing
    assert node.sup.warm.standbys == []


async def test_draining_retires_the_standbys_and_lifting_it_brings_them_back(node_factory) -> None:
    node = await node_factory({"FAKE": "forever"}, warm_workers=1)
    (before,) = await ready(node, 1)
    node.draining = True
    await wait_until(lambda: pid_gone(before) and not node.sup.warm.standbys, 30, "the standby retired")
    node.draining = False
    (after,) = await ready(node, 1)
    assert after != before


async def test_a_reload_that_changes_trainer_retires_the_standbys(node_factory) -> None:
    node = await node_factory({"FAKE": "forever"}, warm_workers=1)
    (before,) = await ready(node, 1)
    same = node.sup.cfg
    node.sup.reconfigure(same, node.sup.python)  # nothing changed: kept
    changed = msgspec.structs.replace(same, hang_floor_s=same.hang_floor_s + 1)
    assert ready_pids(node) == {before}
    node.sup.reconfigure(changed, node.sup.python)
    assert node.sup.warm.take() is None  # started under the old settings: never handed a worker
    await wait_until(lambda: ready_pids(node) - {before}, 30, "a new standby")
    await wait_until(lambda: pid_gone(before), 30, "the old standby retired")
    assert len(node.sup.warm.standbys) == 1


async def test_a_standby_that_dies_before_ready_is_retried_with_back_off(node_factory) -> None:
    clock = SimClock()
    node = await node_factory({"FAKE_WARM": "fail"}, clock=clock, warm_workers=1)
    warm = node.sup.warm
    await tick(node, clock, 1.0)
    assert warm.stats.started == 1
    await wait_until(lambda: warm.standbys[0].proc.returncode is not None, 30, "the standby to exit")
    await tick(node, clock, 1.0)
    assert (warm.stats.failed, warm.standbys) == (1, [])
    await tick(node, clock, 1.0)
    await tick(node, clock, 1.0)
    assert warm.stats.started == 1  # backing off: 5 s after the first failure
    await tick(node, clock, 3.0)
    assert warm.stats.started == 2


async def test_a_standby_not_ready_in_time_is_retired(node_factory) -> None:
    clock = SimClock()
    node = await node_factory({"FAKE_WARM": "slow"}, clock=clock, warm_workers=1, startup_timeout_s=5.0)
    warm = node.sup.warm
    await tick(node, clock, 1.0)
    (slow,) = [s.pid for s in warm.standbys]
    await tick(node, clock, 4.0)
    assert [s.pid for s in warm.standbys] == [slow] and warm.stats.failed == 0
    await tick(node, clock, 1.0)
    assert warm.stats.failed == 1 and warm.standbys == []
    await wait_until(lambda: pid_gone(slow), 30, "the slow standby retired")


async def test_warm_workers_default_to_one_per_gpu(node_factory) -> None:
    node = await node_factory({"FAKE": "forever"}, warm_workers=0)
    assert node.sup.warm_target() == 0
    node.sup.cfg = TrainerConfig()
    assert node.sup.warm_target() == 4  # the fixture's node has 4 GPUs
    node.draining = True
    assert node.sup.warm_target() == 0


@pytest.mark.parametrize("checkpoint", [True, False])
async def test_stop_of_warm_workers_is_a_stop(node_factory, checkpoint) -> None:
    node = await node_factory({"FAKE": "forever"}, warm_workers=2)
    await ready(node, 2)
    await node.sup.start(start_args([0, 1]))
    await wait_until(lambda: node.progress, 30, "progress")
    result = await node.sup.stop("j1", 0, checkpoint=checkpoint)
    assert result.stopped and result.asked_to_checkpoint is checkpoint
    if checkpoint:
        assert result.exit_codes == {"0": 0, "1": 0} and result.terminated == []
    assert node.faults == [] and node.completions == []
