"""``myolo-train`` end to end: output formats, fail-fast validation, failure propagation, resume, and the
worker obeying an agent over ZeroMQ. Real processes, gloo on CPU, the tiny model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import zmq

from myolo.events.payloads import TrainingProgress
from myolo.kernels.parallel import rendezvous

REPO = Path(__file__).resolve().parents[3]
TINY = ["--model", "tiny", "--seed", "0", "--global-batch", "4", "--seq-len", "16"]


def myolo_train(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "myolo.kernels.cli.launch", *args],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def steps_of(stdout: str) -> list[dict]:
    recs = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [r for r in recs if r["event"] == "step"]


def test_json_has_one_object_per_step_and_human_output_is_lines() -> None:
    proc = myolo_train("--nproc", "2", "--tp", "2", "--steps", "3", *TINY, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    recs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert recs[0]["event"] == "start" and recs[0]["layout"] == "pp=1 x dp=1 x tp=2"
    steps = [r for r in recs if r["event"] == "step"]
    assert [r["step"] for r in steps] == [1, 2, 3]
    for r in steps:
        assert r["loss"] > 0 and r["tokens_per_s"] > 0 and r["step_time_s"] > 0 and r["grad_norm"] > 0
        assert r["mfu"] is None  # no known peak on CPU
        assert {"rms_norm", "attention", "cross_entropy", "adamw"} <= set(r["backends"])

    human = myolo_train("--nproc", "1", "--steps", "2", *TINY)
    assert human.returncode == 0, human.stderr[-2000:]
    assert "layout pp=1 x dp=1 x tp=1" in human.stdout and "ops:" in human.stdout
    assert "step 2/2 | loss" in human.stdout and "tok/s" in human.stdout and "ms/step" in human.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "6", "--pp", "2", "--tp", "4"], "does not divide the world size 6"),
        (["--nproc", "8", "--tp", "8"], "not divisible by tp=8"),
        (["--nproc", "2", "--pp", "2", "--micro-batch", "4", "--global-batch", "4"], "fewer than the 2"),
        (["--nproc", "4", "--dp", "4", "--global-batch", "6"], "(--global-batch): 6 is not divisible by dp=4"),
        (["--nproc", "1", "--model-arg", "vocab"], "must look like name=value"),
    ],
)
def test_bad_config_fails_before_spawning(args: list[str], message: str) -> None:
    proc = myolo_train(*[a for a in TINY if a not in ("--global-batch", "4")], *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "rank" not in proc.stderr  # no worker ever started


def test_first_failing_rank_is_reported() -> None:
    proc = myolo_train(
        "--nproc",
        "4",
        "--dp",
        "2",
        "--tp",
        "2",
        "--steps",
        "5",
        *TINY,
        "--json",
        env={"MYOLO_INJECT_FAULT": "rank=3,step=2"},
    )
    assert proc.returncode == 1
    assert "rank 3 failed first" in proc.stderr
    assert "injected fault (MYOLO_INJECT_FAULT) on rank 3 at step 2" in proc.stderr
    assert [r["step"] for r in steps_of(proc.stdout)] == [1]


def test_resume_after_a_crash_continues_the_same_run(tmp_path: Path) -> None:
    """Crash at step 5 with checkpoints every 2 steps; resuming replays the uninterrupted losses."""
    common = ["--nproc", "2", "--dp", "2", "--steps", "7", *TINY, "--json"]
    full = {r["step"]: r["loss"] for r in steps_of(myolo_train(*common).stdout)}
    ck = ["--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "2"]
    crashed = myolo_train(*common, *ck, env={"MYOLO_INJECT_FAULT": "rank=1,step=5"})
    assert crashed.returncode == 1 and "rank 1 failed first" in crashed.stderr
    resumed = myolo_train(*common, *ck, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    steps = steps_of(resumed.stdout)
    assert steps[0]["step"] in (3, 5)  # the newest complete checkpoint (2 or 4) + 1
    assert steps[-1]["step"] == 7
    for r in steps:
        assert r["loss"] == pytest.approx(full[r["step"]], rel=1e-6)


def test_worker_reports_to_an_agent_and_obeys_stop(tmp_path: Path) -> None:
    """Two workers under a fake agent: per-replica progress and per-rank heartbeats arrive, each rank's first
    heartbeat (step 0) as soon as it is built and joined, before its first step; 'stop' ends the run after
    the current step with exit code 0."""
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(f"ipc://{tmp_path}/progress")
    push = ctx.socket(zmq.PUSH)
    push.bind(f"ipc://{tmp_path}/control")
    store = rendezvous.host_store()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "myolo.kernels.cli.worker", *TINY, "--dp", "2", "--steps", "1000"],
            cwd=REPO,
            env={
                **os.environ,
                "OMP_NUM_THREADS": "1",
                "RANK": str(r),
                "WORLD_SIZE": "2",
                "LOCAL_RANK": str(r),
                **rendezvous.worker_env(store),
                "MYOLO_JOB_ID": "job-7",
                "MYOLO_GENERATION": "3",
                "MYOLO_ZMQ_PROGRESS": f"ipc://{tmp_path}/progress",
                "MYOLO_ZMQ_CONTROL": f"ipc://{tmp_path}/control",
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    decoder = msgspec.json.Decoder(TrainingProgress)
    progress: list[TrainingProgress] = []
    first_beat: dict[int, int] = {}  # rank -> step of its first heartbeat
    try:
        while not any(p.step >= 3 for p in progress):
            assert pull.poll(120_000), "no message from the workers"
            topic, body = pull.recv_multipart()
            if topic == b"progress":
                progress.append(decoder.decode(body))
            else:
                beat = json.loads(body)
                first_beat.setdefault(beat["rank"], beat["step"])
        push.send(json.dumps({"kind": "stop", "job_id": "job-7", "generation": 3}).encode())
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        pull.close(0)
        push.close(0)
        ctx.term()
    assert codes == [0, 0], [p.stderr.read()[-2000:] for p in procs]
    assert {p.dp_rank for p in progress} == {0, 1}
    assert all(p.job_id == "job-7" and p.generation == 3 and p.world_size == 2 for p in progress)
    assert all(p.gradient_staleness == 0 and p.loss > 0 for p in progress)
    assert first_beat == {0: 0, 1: 0}
    assert max(p.step for p in progress) < 1000  # stopped early
