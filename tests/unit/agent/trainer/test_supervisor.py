"""The supervisor with real worker processes (``fake_worker.py``) over real ZeroMQ."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import pytest

from myolo.agent.trainer.signals import process_stopped
from myolo.common.clock import SimClock
from tests.support.helpers import wait_until
from tests.unit.agent.trainer.conftest import start_args


async def test_workers_train_report_progress_and_complete(node_factory) -> None:
    node = await node_factory({"FAKE": "steps:6"})
    result = await node.sup.start(start_args([1, 3]))
    assert sorted(result.pids) == ["0", "1"]
    assert node.gpu_use[-1] == {1: [result.pids["0"]], 3: [result.pids["1"]]}
    await wait_until(lambda: node.completions, 30, "the completion")
    done = node.completions[0]
    assert (done.job_id, done.generation, done.ranks, done.last_step, done.simulated) == ("j1", 0, [0, 1], 6, True)
    steps = [p.step for p in node.progress]
    assert steps and steps[-1] == 6, steps
    assert all(p.node_id == "node-a" for p in node.progress)
    assert node.faults == [] and node.sup.jobs == {}
    assert node.gpu_use[-1] == {}
    assert done in node.urgent


async def test_progress_is_throttled_per_job_and_the_last_step_goes_out(node_factory) -> None:
    node = await node_factory({"FAKE": "steps:30", "FAKE_STEP_S": "0.01"}, progress_interval_s=3600.0)
    await node.sup.start(start_args([0, 1]))
    await wait_until(lambda: node.completions, 30, "the completion")
    assert [p.step for p in node.progress] == [1, 30]  # the first at once, then only the final one
    assert node.sup.stats.progress_in == 60 and node.sup.stats.progress_out == 2


async def test_a_worker_that_fails_is_a_fault_and_its_peers_are_stopped(node_factory) -> None:
    node = await node_factory({"FAKE_0": "forever", "FAKE_1": "fail:3"})
    result = await node.sup.start(start_args([0, 1]))
    await wait_until(lambda: node.faults and not node.sup.jobs, 30, "the fault and the stop")
    (fault,) = node.faults
    assert (fault.kind, fault.rank, fault.exit_code, fault.signal) == ("worker_exit", 1, 3, None)
    # the last step heard: its step-3 record may still be in flight when the exit is seen (a race the agent
    # narrows by reading what is queued first, and cannot close)
    assert fault.last_step is not None and 1 <= fault.last_step <= 3
    assert fault.pid == result.pids["1"]
    assert "RuntimeError: injected failure" in fault.log_tail
    assert fault in node.urgent
    assert node.completions == []


async def test_a_killed_worker_names_the_signal(node_factory) -> None:
    node = await node_factory({"FAKE": "forever"})
    result = await node.sup.start(start_args([0, 1]))
    await wait_until(lambda: node.progress, 30, "progress")
    os.kill(result.pids["1"], signal.SIGKILL)
    await wait_until(lambda: node.faults and not node.sup.jobs, 30, "the fault and the stop")
    (fault,) = node.faults
    assert (fault.kind, fault.rank, fault.signal, fault.exit_code) == ("worker_exit", 1, "SIGKILL", None)
    assert "killed by SIGKILL" in (fault.message or "")


async def test_a_silent_worker_is_a_hang_on_the_agents_clock(node_factory) -> None:
    clock = SimClock()
    node = await node_factory({"FAKE_0": "forever", "FAKE_1": "silent:3"}, clock=clock, hang_floor_s=30.0)
    result = await node.sup.start(start_args([0, 1]))
    await wait_until(lambda: node.sup.jobs["j1"].workers[1].last_step == 3, 30, "rank 1 at step 3")
    os.kill(result.pids["0"], signal.SIGSTOP)  # both silent now; the stopped one is named
    await wait_until(lambda: process_stopped(result.pids["0"]), 30, "the kernel to stop rank 0")
    node.sup.check_hangs()
    assert node.faults == []  # no time passed on the agent's clock
    await clock.advance(31.0)
    node.sup.check_hangs()
    (fault,) = node.faults
    assert (fault.kind, fault.rank, fault.bound_s) == ("worker_hang", 0, 30.0)
    assert fault.silent_s is not None and fault.silent_s > 30.0
    assert "process stopped" in (fault.message or "")
    await wait_until(lambda: not node.sup.jobs, 30, "the workers to be stopped")


async def test_stop_with_checkpoint_asks_rank_0_and_every_rank_leaves(node_factory, tmp_path) -> None:
    node = await node_factory({"FAKE": "forever"})
    await node.sup.start(start_args([0, 1]))
    # every rank through its start-up (rank 0's progress alone does not say rank 1 is: a rank still starting
    # is terminated at once, which is the next test's case)
    workers = lambda: node.sup.jobs["j1"].workers.values()  # noqa: E731
    await wait_until(lambda: node.progress and all(w.state == "running" for w in workers()), 30, "every rank running")
    result = await node.sup.stop("j1", 0, checkpoint=True)
    assert result.stopped and result.asked_to_checkpoint
    assert result.exit_codes == {"0": 0, "1": 0} and result.terminated == [] == result.killed
    assert list((tmp_path / "workers" / "j1" / "g0").glob("stopped-at-*"))
    assert node.faults == [] and node.completions == []  # a requested stop is neither
    assert node.sup.jobs == {}


async def test_a_stop_does_not_wait_for_a_worker_still_in_its_start_up(node_factory) -> None:
    """Rank 1 never gets through its start-up (as one whose peers stopped while it imported): it has nothing to
    save and cannot hear the stop, so it is terminated at once; rank 0 checkpoints and leaves as asked. On a
    clock that does not move, a wait of ``stop_timeout_s`` for rank 1 would never end."""
    node = await node_factory({"FAKE_0": "forever", "FAKE_1": "starting"}, clock=SimClock(), stop_timeout_s=600.0)
    started = await node.sup.start(start_args([0, 1]))
    try:
        await wait_until(lambda: node.sup.jobs["j1"].workers[0].last_step, 30, "rank 0 training")
        result = await asyncio.wait_for(node.sup.stop("j1", 0, checkpoint=True), 60)
    finally:  # a stop that waits for rank 1 leaves no worker behind it for the teardown
        for pid in started.pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert result.stopped and result.asked_to_checkpoint
    assert result.exit_codes == {"0": 0, "1": -signal.SIGTERM}
    assert result.terminated == [1] and result.killed == []
    assert node.faults == [] and node.sup.jobs == {}


async def test_stop_escalates_to_sigkill_for_a_worker_that_ignores_sigterm(node_factory) -> None:
    node = await node_factory({"FAKE": "stubborn"}, term_grace_s=0.5)
    result = await node.sup.start(start_args([2]))
    await wait_until(lambda: node.progress, 30, "progress")
    stopped = await node.sup.stop("j1", 0, checkpoint=False)
    assert stopped.terminated == [0] and stopped.killed == [0]
    assert stopped.exit_codes == {"0": -signal.SIGKILL}
    with pytest.raises(ProcessLookupError):
        os.kill(result.pids["0"], 0)


async def test_stop_of_a_generation_not_running_here_is_a_result(node_factory) -> None:
    node = await node_factory({"FAKE": "forever"})
    await node.sup.start(start_args([0], generation=4))
    other = await node.sup.stop("j1", 3, checkpoint=True)
    assert other.stopped is False and "generation 4 runs here" in other.note
    assert (await node.sup.stop("nope", 0, checkpoint=True)).stopped is False


async def test_admission_names_the_argument(node_factory) -> None:
    from myolo.agent.commands.args import ArgsError

    node = await node_factory({"FAKE": "forever"})
    with pytest.raises(ArgsError) as err:
        node.sup.admit(start_args([1, 4]))
    assert err.value.field == "args.gpus" and "GPU 4 does not exist" in err.value.reason
    await node.sup.start(start_args([1]))
    with pytest.raises(ArgsError) as err:
        node.sup.admit(start_args([1], job_id="j2"))
    assert err.value.field == "args.gpus" and "in use by job j1" in err.value.reason
    with pytest.raises(ArgsError) as err:
        node.sup.admit(start_args([2], generation=1))
    assert err.value.field == "args.generation"


async def test_close_stops_every_worker(node_factory) -> None:
    node = await node_factory({"FAKE": "forever"})
    result = await node.sup.start(start_args([0, 1]))
    await wait_until(lambda: node.progress, 30, "progress")
    await node.sup.close()
    for pid in result.pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_the_worker_link_uses_unix_sockets_in_the_runtime_directory(node_factory, tmp_path) -> None:
    from pathlib import Path

    from myolo.agent.trainer.link import WorkerLink

    node = await node_factory({"FAKE": "steps:3"})
    assert node.sup.link is not None and node.sup.link.progress_endpoint == f"ipc://{tmp_path}/zmq-workers.sock"
    await node.sup.start(start_args([0]))
    assert (tmp_path / "zmq-control-0.sock").exists()  # the job's control socket, while it runs
    await wait_until(lambda: node.completions, 30, "the completion")
    assert not (tmp_path / "zmq-control-0.sock").exists()

    long_dir = Path("/tmp") / ("d" * 120)
    link = WorkerLink(long_dir)  # too long for a socket name: loopback TCP instead
    assert link.progress_endpoint.startswith("tcp://127.0.0.1:")
    link.close()


async def test_a_restarted_agent_stops_the_workers_its_previous_run_left(node_factory, tmp_path) -> None:
    import json
    import subprocess
    import sys

    from myolo.agent.trainer import leftovers

    # what a previous run left: a worker (its own session) and its record
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        leftovers.record(tmp_path / "workers", left.pid, "worker")
        node = await node_factory({"FAKE": "forever"})
        assert left.wait(timeout=30) == -signal.SIGKILL
        assert node.sup.stats.leftovers_stopped == 1
        assert not list((tmp_path / "workers" / leftovers.DIR_NAME).glob("*.json"))
        # this run's workers are recorded in turn, with the start time that tells a reused pid apart
        result = await node.sup.start(start_args([0, 1]))
        for pid in result.pids.values():
            rec = json.loads((tmp_path / "workers" / leftovers.DIR_NAME / f"{pid}.json").read_bytes())
            assert rec == {"pid": pid, "start_ticks": leftovers.start_ticks(pid), "what": "worker"}
    finally:
        left.kill()
        left.wait()
