"""The agent as the node's training supervisor: how fast it starts and stops workers, how fast a killed worker
is a fault on Kafka, and what supervising costs it -> ``results/supervisor.json``.

1. Start: a signed ``start_workers`` (``tiny``, 2 workers, 2 simulated GPUs) to the first
   ``training.progress`` event of the job consumed from Kafka. Baseline, alternating with it in the same
   run: ``myolo-train --nproc 2 --json`` of the same job, from spawn to its first step record on stdout.
2. Stop: a signed ``stop_workers`` (with and without checkpoint) to every worker process (and descendant)
   exited, and to its ``done`` acknowledgement consumed from Kafka.
3. Fault: ``kill -9`` of one worker to the ``worker_exit`` fault consumed from Kafka.
1w. Warm start: the same start on an agent that keeps warm standby workers (``[trainer] warm_workers = 2``:
   processes that have already imported torch and the trainer), each start once both are ready, as they are
   between two generations of a job; the agent of 1 keeps none (``warm_workers = 0``), so 1 is the cold start.
4. CPU: one agent with 8 simulated GPUs supervising 8 synthetic workers (``fake_worker.py``: the real ZeroMQ
   protocol, no torch) at 10 steps/s each, a progress record per step and a heartbeat a second per rank (as
   the trainer's AgentLink); the agent process's user+sys CPU over wall time, against the same agent idle just before.

Everything is real: ``myolo-agent run`` processes, the broker, signed commands, torch workers in 1-3. Each
start of 1 ends the job with the next ending of 2-3 in turn, so three starts give one of each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
from pytest import MonkeyPatch

from myolo.events.payloads import CommandAck, Payload, TrainingFault, TrainingProgress
from myolo.events.payloads.trainer_flags import flag
from myolo.events.settings import KafkaSettings
from myolo.events.topics import CATALOGUE, ensure_topics
from tests.benchmarks.broker import benchmark_broker
from tests.benchmarks.common import write_result
from tests.support.agent.agent_proc import ROOT
from tests.support.agent.trainer_rig import TINY_FIELDS, Rig, rig, tiny_job
from tests.support.helpers import wait_until

PROGRESS_INTERVAL_S = 1.0  # the deployed default of [trainer] progress_interval_s
ENDINGS = ("stop_checkpoint", "stop_no_checkpoint", "kill_worker")  # one per start, in this order
FAKE_WORKER = ROOT / "tests" / "support" / "agent" / "fake_worker.py"
CPU_GPUS = 8
CPU_STEP_S = 0.1
CPU_WARMUP_S = 5.0
CPU_WINDOW_S = 30.0
CPU_TARGET_PCT = 2.0
POLL_S = 0.005


class Stamped(list):
    """The rig's list of consumed events, with the monotonic time each one was handed to the reader."""

    def __init__(self) -> None:
        super().__init__()
        self.at: list[float] = []

    def append(self, item: Payload) -> None:
        self.at.append(time.monotonic())
        super().append(item)

    def first(self, match: Callable[[Payload], bool]) -> float | None:
        return next((t for t, e in zip(self.at, self, strict=True) if match(e)), None)


class Procs:
    """Every worker process the benchmark saw, so none outlives it whatever fails (psutil checks the pid is
    still the same process before it signals)."""

    def __init__(self) -> None:
        self.seen: list[psutil.Process] = []

    def add(self, pids: list[int]) -> list[psutil.Process]:
        found = []
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                found += [p, *p.children(recursive=True)]
        self.seen += found
        return found

    def kill_all(self) -> None:
        for p in self.seen:
            with contextlib.suppress(psutil.Error):
                p.kill()


def exited(procs: list[psutil.Process]) -> bool:
    """Every process has exited (a zombie has: only its parent's bookkeeping is left)."""
    for p in procs:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


async def until_exited(procs: list[psutil.Process], timeout: float = 120.0) -> float:
    await wait_until(lambda: exited(procs), timeout, "every worker process to exit", every=POLL_S)
    return time.monotonic()


def r3(x: float) -> float:
    return round(x, 3)


def fresh(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


@contextlib.contextmanager
def bench_env(**env: str) -> Iterator[MonkeyPatch]:
    """The environment the agents (and through them their workers) start with; undone afterwards."""
    with MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        yield mp


async def warm_up(r: Rig) -> None:
    """A command that does nothing (stop a job not running here): once its ack is back, the agent's command
    consumer and the benchmark's reader are both assigned, so no measurement pays a consumer group join."""
    cid = await r.command(r.agents[0], "stop_workers", job_id="bench-warm-up", generation=0, checkpoint=False)
    ack = await r.outcome(cid, 120)
    assert ack.status == "done", ack


def stamped(r: Rig) -> Stamped:
    assert isinstance(r.events, Stamped), "the rig's events list is replaced by a Stamped one first"
    return r.events


def final_ack_at(r: Rig, command_id: str) -> float | None:
    return stamped(r).first(
        lambda e: isinstance(e, CommandAck) and e.command_id == command_id and e.status != "accepted"
    )


# ---------------------------------------------------------------------------------------------- 1-3: tiny
async def agent_start(r: Rig, procs: Procs, ckpt: Path) -> tuple[str, dict[str, int], dict[str, Any]]:
    job = f"bench-{uuid.uuid4().hex[:8]}"
    spec = tiny_job({"optimizer.steps": 100_000, "checkpoint.dir": str(ckpt)})
    t0 = time.monotonic()
    (cid,) = await r.start_job(job, spec, [[0, 1]])
    ack = await r.outcome(cid, 300)
    assert ack.status == "done", ack
    pids = ack.result["pids"]
    procs.add(list(pids.values()))
    await wait_until(lambda: r.progress(job), 300, f"the first progress event{r.logs()}")
    first = r.progress(job)[0]
    t_first = stamped(r).first(lambda e: isinstance(e, TrainingProgress) and e.job_id == job)
    t_ack = final_ack_at(r, cid)
    assert t_first is not None and t_ack is not None
    return (
        job,
        pids,
        {
            "to_workers_started_ack_s": r3(t_ack - t0),
            "to_first_progress_s": r3(t_first - t0),
            "first_step": first.step,
            "warm_ranks": ack.result.get("warm_ranks"),
        },
    )


async def agent_stop(r: Rig, procs: Procs, job: str, pids: dict[str, int], checkpoint: bool, ckpt: Path) -> dict:
    watched = procs.add(list(pids.values()))
    t0 = time.monotonic()
    cid = await r.command(r.agents[0], "stop_workers", job_id=job, generation=0, checkpoint=checkpoint)
    t_gone = await until_exited(watched)
    ack = await r.outcome(cid, 120)
    t_ack = final_ack_at(r, cid)
    assert t_ack is not None
    marker = ckpt / "latest.json"
    return {
        "checkpoint": checkpoint,
        "processes_watched": len(watched),
        "to_every_process_exited_s": r3(t_gone - t0),
        "to_ack_s": r3(t_ack - t0),
        "ack_status": ack.status,
        "stopped_at_step": ack.result.get("last_step"),
        "checkpoint_step": json.loads(marker.read_text())["step"] if marker.exists() else None,
        "exit_codes": ack.result.get("exit_codes"),
        "sigterm_ranks": ack.result.get("terminated"),
        "sigkill_ranks": ack.result.get("killed"),
    }


async def agent_kill(r: Rig, procs: Procs, job: str, pids: dict[str, int]) -> dict:
    watched = procs.add(list(pids.values()))
    t0 = time.monotonic()
    os.kill(pids["1"], signal.SIGKILL)
    await wait_until(lambda: r.faults(job), 60, f"the fault{r.logs()}", every=POLL_S)
    t_fault = stamped(r).first(lambda e: isinstance(e, TrainingFault) and e.job_id == job)
    t_gone = await until_exited(watched)
    assert t_fault is not None
    fault = r.faults(job)[0]
    return {
        "killed_rank": 1,
        "to_fault_consumed_s": r3(t_fault - t0),
        "fault": {"kind": fault.kind, "rank": fault.rank, "signal": fault.signal},
        "to_peers_exited_s": r3(t_gone - t0),
    }


async def agent_run(r: Rig, procs: Procs, ending: str, ckpt: Path) -> dict:
    job, pids, start = await agent_start(r, procs, ckpt)
    await wait_until(lambda: len(r.progress(job)) >= 3, 120, f"progress to flow{r.logs()}")
    if ending == "kill_worker":
        end = await agent_kill(r, procs, job, pids)
    else:
        end = await agent_stop(r, procs, job, pids, ending == "stop_checkpoint", ckpt)
    return {"start": start, ending: end}


def launch_argv(ckpt: Path) -> list[str]:
    """``myolo-train`` flags of the job the agent gets (one definition: TINY_FIELDS)."""
    spec = {**TINY_FIELDS, "optimizer.steps": 100_000, "checkpoint.dir": str(ckpt)}
    flags = [arg for path, v in spec.items() for arg in (flag(path), str(v))]
    return [sys.executable, "-m", "myolo.kernels.cli.launch", "--nproc", "2", *flags, "--json"]


async def launch_start(procs: Procs, ckpt: Path, log: Path) -> dict:
    """Spawn to the first step record on stdout; then SIGINT (the launcher stops its workers) and wait."""
    t0 = time.monotonic()
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *launch_argv(ckpt), cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=err, stdin=asyncio.subprocess.DEVNULL
        )
    watched: list[psutil.Process] = []
    try:
        assert proc.stdout is not None
        step = None
        while step is None:
            line = await asyncio.wait_for(proc.stdout.readline(), 300)
            if not line:
                raise RuntimeError(f"myolo-train ended before its first step:\n{log.read_text()[-3000:]}")
            rec = json.loads(line) if line.startswith(b"{") else {}
            step = rec.get("step") if rec.get("event") == "step" else None
        t_first = time.monotonic()
        watched = procs.add([proc.pid])
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.communicate(), 60)
        await until_exited(watched)
    finally:
        for p in [*watched, *procs.add([proc.pid])]:  # only after a failure is anything left
            with contextlib.suppress(psutil.Error):
                p.kill()
        await asyncio.wait_for(proc.wait(), 30)
    return {"to_first_step_s": r3(t_first - t0), "first_step": step}


async def launcher_import_s() -> float:
    """What ``myolo-train`` does before it spawns a worker (its imports pull in torch): the part of the
    baseline the running agent does not pay."""
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import myolo.kernels.cli.launch", cwd=ROOT)
    assert await proc.wait() == 0
    return r3(time.monotonic() - t0)


async def tiny_runs(settings: KafkaSettings, broker: Any, tmp: Path, procs: Procs) -> dict:
    agent_runs, launch_runs = [], []
    with bench_env(MYOLO_TRAINER_WARM_WORKERS="0") as mp:
        async with rig(settings, broker, fresh(tmp / "tiny"), mp, gpus=2, progress_interval_s=PROGRESS_INTERVAL_S) as r:
            r.events = Stamped()
            await warm_up(r)
            for i, ending in enumerate(ENDINGS):
                agent_first = i % 2 == 0  # alternate which goes first, so drift in the machine's load evens out
                for who in ("agent", "launch") if agent_first else ("launch", "agent"):
                    if who == "agent":
                        agent_runs.append(await agent_run(r, procs, ending, tmp / f"ckpt-agent-{i}"))
                    else:
                        launch_runs.append(await launch_start(procs, tmp / f"ckpt-launch-{i}", tmp / f"launch-{i}.log"))
                    print(json.dumps({who: (agent_runs if who == "agent" else launch_runs)[-1]}), flush=True)
    agent_med = statistics.median(a["start"]["to_first_progress_s"] for a in agent_runs)
    launch_med = statistics.median(b["to_first_step_s"] for b in launch_runs)
    return {
        "job": {**tiny_job({"optimizer.steps": 100_000}), "workers": 2, "progress_interval_s": PROGRESS_INTERVAL_S},
        "agent": agent_runs,
        "baseline_myolo_train": launch_runs,
        "start_median_s": {
            "agent_command_to_first_progress_on_kafka": r3(agent_med),
            "myolo_train_spawn_to_first_step_on_stdout": r3(launch_med),
            "ratio_agent_over_myolo_train": r3(agent_med / launch_med),
        },
        "myolo_train_own_import_s": await launcher_import_s(),
    }


# ---------------------------------------------------------------------------------------------- 1w: warm
async def standbys_ready(r: Rig, count: int) -> float:
    """Wait until the agent's health endpoint shows ``count`` warm standbys ready; how long that took."""
    t0 = time.monotonic()

    async def ready() -> bool:
        _, health = await asyncio.to_thread(r.agents[0].health)
        return health["checks"]["workers"]["data"]["warm"]["ready"] >= count

    await wait_until(ready, 300, f"{count} warm standbys{r.logs()}", every=0.2)
    return r3(time.monotonic() - t0)


async def warm_runs(settings: KafkaSettings, broker: Any, tmp: Path, procs: Procs) -> dict:
    runs = []
    with bench_env(MYOLO_TRAINER_WARM_WORKERS="2") as mp:
        async with rig(settings, broker, fresh(tmp / "warm"), mp, gpus=2, progress_interval_s=PROGRESS_INTERVAL_S) as r:
            r.events = Stamped()
            await warm_up(r)
            for i, ending in enumerate(ENDINGS):
                waited = await standbys_ready(r, 2)
                run = await agent_run(r, procs, ending, tmp / f"ckpt-warm-{i}")
                runs.append({"waited_for_standbys_s": waited, **run})
                print(json.dumps({"agent_warm": runs[-1]}), flush=True)
    return {
        "warm_workers": 2,
        "agent": runs,
        "start_median_s": {
            "agent_warm_command_to_first_progress_on_kafka": r3(
                statistics.median(a["start"]["to_first_progress_s"] for a in runs)
            )
        },
    }


# ---------------------------------------------------------------------------------------------- 4: CPU
async def cpu_share(p: psutil.Process, seconds: float) -> dict:
    t0, c0 = time.monotonic(), p.cpu_times()
    await asyncio.sleep(seconds)  # measured over wall time on purpose
    t1, c1 = time.monotonic(), p.cpu_times()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    return {"wall_s": r3(t1 - t0), "cpu_s": r3(cpu), "pct_of_one_core": r3(100 * cpu / (t1 - t0))}


async def supervision_cpu(settings: KafkaSettings, broker: Any, tmp: Path, procs: Procs) -> dict:
    env = {
        "MYOLO_TRAINER_PYTHON": json.dumps([sys.executable, str(FAKE_WORKER)]),
        "MYOLO_SAMPLE_INTERVAL_S": "1.0",  # the deployed sampling rate (the rig's agents sample at 2 Hz)
        "FAKE": "forever",
        "FAKE_STEP_S": str(CPU_STEP_S),
    }
    with bench_env(**env) as mp:
        async with rig(
            settings, broker, fresh(tmp / "cpu"), mp, gpus=CPU_GPUS, progress_interval_s=PROGRESS_INTERVAL_S
        ) as r:
            r.events = Stamped()
            await warm_up(r)
            agent = psutil.Process(r.agents[0].proc.pid)
            await asyncio.sleep(CPU_WARMUP_S)
            idle = await cpu_share(agent, CPU_WINDOW_S)

            job = f"bench-cpu-{uuid.uuid4().hex[:8]}"
            (cid,) = await r.start_job(job, tiny_job({"optimizer.steps": 100_000}), [list(range(CPU_GPUS))])
            ack = await r.outcome(cid, 120)
            assert ack.status == "done", ack
            watched = procs.add(list(ack.result["pids"].values()))
            await wait_until(lambda: r.progress(job), 60, f"progress{r.logs()}")
            await asyncio.sleep(CPU_WARMUP_S)
            n0 = len(r.progress(job))
            busy = await cpu_share(agent, CPU_WINDOW_S)
            window = r.progress(job)[n0:]
            stop = await r.outcome(
                await r.command(r.agents[0], "stop_workers", job_id=job, generation=0, checkpoint=True)
            )
            await until_exited(watched)
    steps = (window[-1].step - window[0].step) / CPU_WINDOW_S if len(window) > 1 else 0.0
    extra = busy["pct_of_one_core"] - idle["pct_of_one_core"]
    offered = CPU_GPUS / CPU_STEP_S + CPU_GPUS  # a progress record per step and rank, a heartbeat a second
    return {
        "gpus": CPU_GPUS,
        "workers": CPU_GPUS,
        "fake_step_s": CPU_STEP_S,
        "worker_messages_per_s_offered": round(offered),
        "worker_steps_per_s_measured": round(steps, 2),
        "progress_interval_s": PROGRESS_INTERVAL_S,
        "sample_interval_s": 1.0,
        "idle_agent": idle,
        "supervising_agent": busy,
        "supervision_pct_of_one_core": r3(extra),
        "supervision_us_per_worker_message": round(extra * 1e4 / offered, 1),
        "progress_events_on_kafka_per_s": r3(len(window) / CPU_WINDOW_S),
        "stop_ack": stop.status,
        "target_pct": CPU_TARGET_PCT,
        "meets_target": {
            "whole_agent_while_supervising": busy["pct_of_one_core"] < CPU_TARGET_PCT,
            "supervision_alone": extra < CPU_TARGET_PCT,
        },
    }


async def run() -> dict:
    procs = Procs()
    with benchmark_broker() as broker, tempfile.TemporaryDirectory(prefix="mbs-", dir="/tmp") as tmp:
        settings = KafkaSettings(bootstrap=broker.bootstrap, client_id="myolo-bench")
        await ensure_topics(settings.client_kwargs(), CATALOGUE)
        try:
            tiny = await tiny_runs(settings, broker, Path(tmp), procs)
            warm = await warm_runs(settings, broker, Path(tmp), procs)
            cpu = await supervision_cpu(settings, broker, Path(tmp), procs)
        finally:
            procs.kill_all()
    return {
        "tiny_2_workers": tiny,
        "tiny_2_workers_warm": warm,
        "cpu_8_workers": cpu,
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    t0 = time.monotonic()
    result = asyncio.run(run())
    write_result("supervisor", {**result, "total_s": round(time.monotonic() - t0, 1)})


if __name__ == "__main__":
    main()
