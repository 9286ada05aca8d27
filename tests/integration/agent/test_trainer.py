"""The agent runs the trainer: real agents, real workers (torch, gloo), the real broker.

Checked: a signed ``start_workers`` trains a 2-worker job to completion with progress and a checkpoint on
Kafka's side; a job across two agents matches ``myolo-train --nproc 2``; a killed worker is a fault naming
its rank and signal and its peers are stopped (py-spy, profiling it meanwhile, finds the trainer's step
and says the profile ended early); a stopped (SIGSTOP) worker is a ``worker_hang`` within the
learned bound; ``stop_workers`` checkpoints, leaves no process and acks ``done``; bad starts are rejected
naming the argument, with nothing started; a job started on warm standby workers trains as a cold one (the
start -> first progress of both is printed, not asserted) and no standby outlives its agent.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.agent.agent_proc import ROOT
from tests.support.agent.trainer_rig import TINY_JOB, rig, tiny_job
from tests.support.helpers import pid_gone, wait_until

pytestmark = pytest.mark.kafka


def job_id() -> str:
    return f"job-{uuid.uuid4().hex[:8]}"


def marker_step(directory: Path) -> int | None:
    marker = directory / "latest.json"
    return json.loads(marker.read_text())["step"] if marker.exists() else None


async def test_a_signed_start_trains_to_completion_with_progress_and_checkpoints(
    settings, kafka, tmp_path, monkeypatch
) -> None:
    job, ckpt = job_id(), tmp_path / "ckpt"
    spec = tiny_job({"optimizer.steps": 12, "checkpoint.dir": str(ckpt), "checkpoint.every": 4})
    async with rig(settings, kafka, tmp_path, monkeypatch, gpus=2) as r:
        (agent,) = r.agents
        (cid,) = await r.start_job(job, spec, [[0, 1]])
        ack = await r.outcome(cid)
        assert ack.status == "done", ack
        pids = ack.result["pids"]
        assert sorted(pids) == ["0", "1"]

        await wait_until(lambda: r.progress(job), 120, f"progress{r.logs()}")
        await wait_until(lambda: r.completions(job), 300, f"the completion{r.logs()}")
        (done,) = r.completions(job)
        assert (done.node_id, done.ranks, done.last_step, done.simulated) == (agent.node_id, [0, 1], 12, True)
        for rank in (0, 1):  # each data-parallel replica reports; its steps increase, to the last one
            steps = [p.step for p in r.progress(job) if p.rank == rank]
            assert steps == sorted(steps) and steps[-1] == 12 and len(set(steps)) >= 2, (rank, steps)
        assert all(p.node_id == agent.node_id and p.generation == 0 for p in r.progress(job))
        # the job's own all-reduce bandwidth, measured once, after its first step (gloo here)
        measured = {p.step: p.allreduce_busbw_gbps for p in r.progress(job) if p.allreduce_busbw_gbps is not None}
        assert list(measured) in ([1], [1, 1]) and all(v > 0 for v in measured.values()), measured
        assert marker_step(ckpt) == 12
        assert all(pid_gone(pid) for pid in pids.values())
        assert r.faults(job) == []


async def wait_for_sample_with_workers(r, agent) -> list:
    """The workers in the node's published samples (``myolo.node.samples``)."""
    from myolo.events.payloads import NodeSample
    from myolo.events.topics import NODE_SAMPLES
    from tests.support.agent.agent_proc import read_topic

    async def found() -> list:
        events = await read_topic(r.settings, NODE_SAMPLES, agent.node_id)
        samples = [e.data for e in events if isinstance(e.data, NodeSample) and e.data.workers]
        return samples[-1].workers if samples else []

    await wait_until(found, 60, "a node sample listing the workers", every=1.0)
    return await found()


def sample_json(agent) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "myolo.agent", "sample", "--json", "--config", str(agent.config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(out.stdout)


async def test_a_job_across_two_agents_matches_myolo_train(settings, kafka, tmp_path, monkeypatch) -> None:
    job = job_id()
    spec = tiny_job({"optimizer.steps": 6, "parallelism.dp": 2})
    async with rig(settings, kafka, tmp_path, monkeypatch, nodes=2, gpus=1) as r:
        acks = [await r.outcome(cid) for cid in await r.start_job(job, spec, [[0], [0]])]
        assert [a.status for a in acks] == ["done", "done"], acks
        assert acks[1].result["pids"].keys() == {"1"}  # node rank 1 holds global rank 1
        await wait_until(lambda: len(r.completions(job)) == 2, 300, f"both completions{r.logs()}")
    by_step: dict[int, list[float]] = {}
    for p in r.progress(job):
        by_step.setdefault(p.step, []).append(p.loss)
    agent_losses = {step: sum(ls) / len(ls) for step, ls in by_step.items() if len(ls) == 2}
    assert sorted(agent_losses) == [1, 2, 3, 4, 5, 6]

    launch = subprocess.run(
        [
            sys.executable,
            "-m",
            "myolo.kernels.cli.launch",
            "--nproc",
            "2",
            "--dp",
            "2",
            "--steps",
            "6",
            "--model",
            "tiny",
            "--seed",
            "0",
            "--global-batch",
            "4",
            "--seq-len",
            "16",
            "--json",
        ],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert launch.returncode == 0, launch.stderr[-2000:]
    reference = {
        rec["step"]: rec["loss"]
        for rec in map(json.loads, (ln for ln in launch.stdout.splitlines() if ln.startswith("{")))
        if rec["event"] == "step"
    }
    for step, loss in agent_losses.items():
        assert loss == pytest.approx(reference[step], rel=1e-6), (step, loss, reference[step])


async def test_a_killed_worker_is_a_fault_and_its_peers_stop(settings, kafka, tmp_path, monkeypatch) -> None:
    """And the worker was being profiled: py-spy's stacks show the trainer's step, and the profile says it
    ended early with the worker."""
    job = job_id()
    async with rig(settings, kafka, tmp_path, monkeypatch, gpus=2) as r:
        (agent,) = r.agents
        pids = await r.running(job, tiny_job({"optimizer.steps": 100_000}), [0, 1])
        nowhere = await r.command(agent, "profile", profile_id="p-none", job_id=job, rank=5, duration_s=5.0)
        refused = await r.outcome(nowhere)
        assert refused.status == "rejected" and "no running worker" in refused.reason and "rank 5" in refused.reason
        profile = await r.command(agent, "profile", profile_id="p-1", job_id=job, rank=1, duration_s=60.0)
        seen = len(r.progress(job))
        await wait_until(lambda: any(a.status == "accepted" for a in r.acks(profile)), 30, "the profile taken")
        await wait_until(lambda: len(r.progress(job)) >= seen + 10, 60, "ten more steps while it is sampled")
        os.kill(pids["1"], signal.SIGKILL)
        await wait_until(lambda: r.faults(job), 60, f"the fault{r.logs()}")
        fault = r.faults(job)[0]
        assert (fault.kind, fault.rank, fault.signal, fault.pid) == ("worker_exit", 1, "SIGKILL", pids["1"])
        assert fault.node_id == r.agents[0].node_id and fault.generation == 0
        await wait_until(lambda: pid_gone(pids["0"]), 60, "rank 0 to be stopped")
        assert r.completions(job) == []
        ack = await r.outcome(profile, 60)
        assert ack.status == "done", ack
        assert ack.result["pid"] == pids["1"] and ack.result.get("ended_early") is True, ack.result
        assert ack.result["samples"] > 0
        assert ack.result["seconds"] < 60.0
        url = f"http://127.0.0.1:{agent.port}/v1/profiles/p-1"
        status, folded = await asyncio.to_thread(_get, url)
        assert status == 200 and json.loads(folded)["state"] == "done"
        status, folded = await asyncio.to_thread(_get, url + "/folded")
        assert status == 200 and "train_step" in folded, folded[:2000]


def _get(url: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


async def test_a_stopped_worker_is_a_hang_within_the_learned_bound(settings, kafka, tmp_path, monkeypatch) -> None:
    job = job_id()
    async with rig(settings, kafka, tmp_path, monkeypatch, gpus=2, hang_floor_s=3.0) as r:
        pids = await r.running(job, tiny_job({"optimizer.steps": 100_000}), [0, 1], progress=5)
        os.kill(pids["0"], signal.SIGSTOP)
        try:
            await wait_until(lambda: r.faults(job), 60, f"the hang{r.logs()}")
        finally:
            await wait_until(lambda: all(pid_gone(p) for p in pids.values()), 60, "every worker to be stopped")
        (fault,) = r.faults(job)
        assert (fault.kind, fault.rank, fault.pid) == ("worker_hang", 0, pids["0"])
        step_times = [p.step_time_s for p in r.progress(job)]
        # the bound is max(floor, 5 x the learned step time): the floor unless a step was slower than 0.6 s
        assert fault.bound_s is not None and fault.bound_s >= 3.0
        assert fault.bound_s == 3.0 or max(step_times) > 0.6 * 0.5, (fault.bound_s, max(step_times))
        assert fault.silent_s is not None and fault.silent_s > fault.bound_s
        # its last step is the last one it reported (the fault follows the job's progress on the partition)
        assert fault.last_step == max(p.step for p in r.progress(job) if p.rank == 0)


async def test_stop_workers_checkpoints_and_leaves_no_process(settings, kafka, tmp_path, monkeypatch) -> None:
    job, ckpt = job_id(), tmp_path / "ckpt"
    spec = tiny_job({"optimizer.steps": 100_000, "checkpoint.dir": str(ckpt)})
    async with rig(settings, kafka, tmp_path, monkeypatch, gpus=2) as r:
        (agent,) = r.agents
        pids = await r.running(job, spec, [0, 1], progress=3)
        # while it trains: the agent's status, health endpoint, node sample and GPUs show the workers
        status = await asyncio.to_thread(agent.cli, "status")
        for rank in ("0", "1"):
            assert f"job {job} g0 rank {rank} gpu {rank} pid {pids[rank]} running" in status.stdout, status.stdout
        _, health = await asyncio.to_thread(agent.health)
        shown = health["checks"]["workers"]["data"]["workers"]
        assert {(w["rank"], w["pid"], w["state"]) for w in shown} == {
            (0, pids["0"], "running"),
            (1, pids["1"], "running"),
        }
        sample = await asyncio.to_thread(sample_json, agent)
        assert [[p["pid"] for p in g["processes"]] for g in sample["gpus"]] == [[pids["0"]], [pids["1"]]]
        assert all(g["util_gpu"] > 50 for g in sample["gpus"])
        published = await wait_for_sample_with_workers(r, agent)
        assert {(w.rank, w.pid) for w in published} == {(0, pids["0"]), (1, pids["1"])}
        stop = await r.command(agent, "stop_workers", job_id=job, generation=0, checkpoint=True)
        ack = await r.outcome(stop, 120)
        assert ack.status == "done", ack
        assert ack.result["asked_to_checkpoint"] is True and ack.result["exit_codes"] == {"0": 0, "1": 0}
        assert ack.result["killed"] == [] and ack.result["terminated"] == []
        assert all(pid_gone(pid) for pid in pids.values())
        assert marker_step(ckpt) == ack.result["last_step"]  # the checkpoint is of the step it stopped at
        maps = Path(f"/proc/{agent.proc.pid}/maps").read_text()
        assert "libtorch" not in maps and "torch/lib" not in maps  # the supervising agent never loaded torch
        assert r.faults(job) == [] and r.completions(job) == []


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"job": tiny_job({"model.name": "gpt-9"})}, "args.job.model.name", "unknown model preset 'gpt-9'"),
        ({"gpus": [0, 2]}, "args.gpus", "GPU 2 does not exist on this node"),
        ({"job": tiny_job({"parallelism.tp": 3})}, "args.job.parallelism.tp", "does not divide the world size 2"),
    ],
)
async def test_a_bad_start_is_rejected_naming_the_argument(
    settings, kafka, tmp_path, monkeypatch, change, field, words
) -> None:
    job = job_id()
    async with rig(settings, kafka, tmp_path, monkeypatch, gpus=2) as r:
        (agent,) = r.agents
        args = {
            "job_id": job,
            "generation": 0,
            "node_rank": 0,
            "nnodes": 1,
            "gpus": [0, 1],
            "master_addr": "127.0.0.1",
            "master_port": 29999,
            "job": TINY_JOB,
            **change,
        }
        ack = await r.outcome(await r.command(agent, "start_workers", **args))
        assert ack.status == "rejected" and ack.result == {"field": field}, ack
        assert words in (ack.reason or "")
        assert [s.status for s in r.acks(ack.command_id)] == ["rejected"]  # never accepted
        assert not (agent.dir / "workers" / job).exists()  # nothing was started


async def test_the_agents_sigterm_stops_its_workers_with_a_checkpoint_first(
    settings, kafka, tmp_path, monkeypatch
) -> None:
    job, ckpt = job_id(), tmp_path / "ckpt"
    spec = tiny_job({"optimizer.steps": 100_000, "checkpoint.dir": str(ckpt)})
    async with rig(settings, kafka, tmp_path, monkeypatch, gpus=2) as r:
        (agent,) = r.agents
        pids = await r.running(job, spec, [0, 1], progress=3)
        agent.signal(signal.SIGTERM)
        assert await asyncio.to_thread(agent.proc.wait, 120) == 0, agent.log_text()[-4000:]
        assert all(pid_gone(pid) for pid in pids.values())  # workers do not outlive their agent
        step = marker_step(ckpt)
        assert step is not None and step >= max(p.step for p in r.progress(job) if p.rank == 0)
        assert "waiting for workers to checkpoint and stop" in agent.log_text()
        await wait_until(lambda: max(p.step for p in r.progress(job)) == step, 30, "the last step's progress")
        assert r.faults(job) == [] and r.completions(job) == []


async def start_to_first_progress(r, job: str, spec: dict) -> tuple[float, dict]:
    """A signed start on the rig's one agent (2 GPUs) to its first progress event consumed: seconds, and the
    start's result."""
    t0 = time.monotonic()
    (cid,) = await r.start_job(job, spec, [[0, 1]])
    await wait_until(lambda: r.progress(job), 300, f"the first progress{r.logs()}", every=0.01)
    took = time.monotonic() - t0
    ack = await r.outcome(cid)
    assert ack.status == "done", ack
    return took, ack.result


async def test_a_job_started_on_warm_standby_workers_trains_as_a_cold_one(
    settings, kafka, tmp_path, monkeypatch
) -> None:
    spec = tiny_job({"optimizer.steps": 6})
    losses: dict[str, dict[int, float]] = {}
    seconds: dict[str, float] = {}
    for kind, count in (("cold", "0"), ("warm", "2")):
        monkeypatch.setenv("MYOLO_TRAINER_WARM_WORKERS", count)
        (tmp_path / kind).mkdir()
        async with rig(settings, kafka, tmp_path / kind, monkeypatch, gpus=2) as r:
            (agent,) = r.agents

            async def two_ready(agent=agent) -> bool:
                _, health = await asyncio.to_thread(agent.health)
                return health["checks"]["workers"]["data"]["warm"]["ready"] == 2

            if kind == "warm":
                await wait_until(two_ready, 120, "two warm standbys", every=0.5)
            job = job_id()
            seconds[kind], result = await start_to_first_progress(r, job, spec)
            assert result["warm_ranks"] == ([0, 1] if kind == "warm" else []), result
            await wait_until(lambda j=job: r.completions(j), 300, f"the completion{r.logs()}")
            assert r.faults(job) == []
            losses[kind] = {p.step: p.loss for p in r.progress(job) if p.rank == 0}
            if kind == "warm":  # replacements come once the job has stepped
                await wait_until(two_ready, 120, "two new standbys", every=0.5)
            standbys = ready_standby_pids(agent.log_text())
            assert len(standbys) == (4 if kind == "warm" else 0)
        assert all(pid_gone(pid) for pid in (*standbys, *result["pids"].values()))  # nothing outlives the agent
    print(f"start -> first progress on Kafka: cold {seconds['cold']:.2f} s, warm {seconds['warm']:.2f} s")
    assert losses["warm"] == pytest.approx(losses["cold"], rel=1e-6) and 6 in losses["warm"]


def ready_standby_pids(log: str) -> set[int]:
    """The pids of the agent's log lines ``warm standby ready`` (console format, colours and all)."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log)
    return {int(pid) for pid in re.findall(r"warm standby ready\b.*\bpid=(\d+)", plain)}
