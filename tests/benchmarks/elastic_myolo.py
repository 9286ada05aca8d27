"""Myolotrain's side of the elastic benchmark (bench_elastic.py): the same tiny job as the torchrun side
(``ELASTIC_JOB``) as an ElasticJob on the local stack (real Kafka, one coordinator, three agents with one simulated
GPU each, real trainer workers), the same node failure, timed from the fault to the first step of the next
generation and split into phases; and goodput under a fault every few minutes.

Times are wall-clock (``time.time()``): the coordinator's clock is the system clock, so its records (the
decision, the commands' answers, the generation's first step) and the workers' log timestamps share one
time line with the fault. Phases (each from the end of the one before):

- ``decision``: fault -> the job's decision (the cordon, or the survivors' worker faults, and the new layout);
- ``stop``: -> the last agent's answer that the old generation's workers are gone;
- ``start``: -> the last agent's answer that the new workers were spawned (admission, trainer check, spawn);
- ``rendezvous``: -> rank 0 joined the process group (interpreter, torch import, gloo rendezvous, mesh);
- ``restore``: -> the checkpoint was loaded into the new layout;
- ``first_step``: -> the coordinator heard the generation's first step.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from myolo.coordinator.cli.auth import stack_token
from myolo.coordinator.jobs.manifest import trainer_spec
from myolo.coordinator.localstack import stack
from myolo.coordinator.localstack.broker import LocalBroker, state
from myolo.events.payloads.trainer_job import TrainerJob
from myolo.kernels.train import progress
from myolo.kernels.train.records import StartRecord, StepRecord
from tests.benchmarks.elastic_torchrun import goodput, r3
from tests.support.helpers import pids_mentioning

ROOT = Path(__file__).resolve().parents[2]
JOB = "bench"
VICTIM = "node-3"  # not rank 0's node, as on the torchrun side (whose store host is spared)


def manifest(job: TrainerJob, ckpt: Path) -> str:
    trainer = trainer_spec(job)  # its sections, as spec.trainer writes them
    return (
        "apiVersion: myolo.ai/v1\nkind: ElasticJob\n"
        f"metadata: {{name: {JOB}}}\n"
        "spec:\n  minReplicas: 1\n  maxReplicas: 3\n  replica: {tp: 1, pp: 1}\n"
        f"  trainer: {json.dumps(trainer)}\n  checkpointDir: {ckpt}\n"
    )


class Stack:
    """The local stack in ``workdir``: started on enter, stopped (and every stray killed) on exit."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.broker = LocalBroker(workdir, tied_to_parent=True)

    def __enter__(self) -> Stack:
        self.broker.start(timeout=120)
        stack.start_members(self.dir, coordinators=1, nodes=3, gpus=1, timeout=120, progress=lambda _: None)
        self.records = {p.name: p for p in state.load(self.dir).processes}
        self.api = self.records["coordinator-1"].info["api_url"]
        token = stack_token(self.dir)  # the stack's admin token: its API authenticates every caller
        self.auth = {"Authorization": f"Bearer {token}"}
        stack.wait_fleet([self.api], ["node-1", "node-2", "node-3"], 120, token)
        return self

    def __exit__(self, *exc: object) -> None:
        stack.stop_members(self.dir, progress=lambda _: None)
        self.broker.stop()
        for pid in pids_mentioning(str(self.dir)):
            os.kill(pid, signal.SIGKILL)
        self.broker.clean()

    def get(self, path: str) -> Any:
        req = urllib.request.Request(f"{self.api}{path}", headers=self.auth)
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.load(resp)

    def post(self, path: str, body: bytes, ctype: str) -> Any:
        req = urllib.request.Request(
            f"{self.api}{path}",
            data=body,
            method="POST",
            headers={"Content-Type": ctype, **self.auth},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.load(resp)

    def job(self) -> dict:
        return self.get(f"/v1/jobs/{JOB}")

    def wait(self, what: str, ok: Callable[[dict], bool], timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                job = self.job()
            except (OSError, ValueError):
                job = None
            if job is not None and ok(job):
                return job
            time.sleep(0.05)
        raise TimeoutError(f"no {what} within {timeout_s:.0f} s: {self.job()}")

    def inject(self, node: str, *args: str) -> None:
        sock = self.records[node].info["socket"]
        subprocess.run(
            [sys.executable, "-m", "myolo.agent", "inject", "--socket", sock, *args],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )

    def kill_node(self, node: str) -> None:
        """A machine dying: its agent and its workers, kill -9."""
        for pid in [self.records[node].pid, *pids_mentioning(str(self.dir / "agents" / node / "workers"))]:
            os.kill(pid, signal.SIGKILL)

    def restart_node(self, node: str) -> None:
        stack.start_members(self.dir, coordinators=1, nodes=3, gpus=1, timeout=120, progress=lambda _: None)
        self.records = {p.name: p for p in state.load(self.dir).processes}

    def rank0_lines(self, generation: int) -> list[str]:
        """Rank 0's log of a generation: on node-1, node rank 0 of every generation here (it never fails)."""
        path = self.dir / "agents" / "node-1" / "workers" / JOB / f"g{generation}" / "rank-0.log"
        return path.read_text().splitlines() if path.exists() else []


def training(replicas: int, above: int = 0, steps: int = 1) -> Callable[[dict], bool]:
    def ok(job: dict) -> bool:
        gen = job.get("generation") or {}
        return (
            job.get("phase") == "Running"
            and gen.get("number", 0) > above
            and gen.get("replicas") == replicas
            and gen.get("resumed_from") is not None
            and job["progress"]["step"] >= gen["resumed_from"] + steps
        )

    return ok


def _ts(line: dict) -> float | None:
    stamp = line.get("timestamp")
    if not isinstance(stamp, str):
        return None
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def worker_marks(lines: list[str]) -> dict[str, float | None]:
    """When rank 0 joined the process group and finished restoring (wall time), and the restore's own length."""
    joined = restored = load_s = None
    for text in lines:
        if not text.startswith("{"):
            continue
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if line.get("event") == "op backends selected" and joined is None:
            joined = _ts(line)
        elif line.get("event") == "resumed from checkpoint":
            restored, load_s = _ts(line), line.get("load_s")
    return {"joined": joined, "restored": restored, "load_s": load_s}


def answered(st: Stack, action: str, generations: range) -> float | None:
    """When the last answered ``action`` command for these generations of the job was answered (commands to a
    node that died are never answered, and not waited for); None when none was."""
    times = [
        i["finished"]
        for i in st.get("/v1/commands")["items"]
        if i["action"] == action
        and i["args"].get("job_id") == JOB
        and i["args"].get("generation") in generations
        and i.get("finished") is not None
    ]
    return max(times) if times else None


def failover_phases(st: Stack, fault_at: float, old: int, new: dict, decision_at: float) -> dict[str, Any]:
    """Phases from the fault to the first step of generation ``new``, made by the decision at ``decision_at``;
    ``old`` ran when the fault came (a generation in between was abandoned on the way)."""
    stopped = max(decision_at, answered(st, "stop_workers", range(old, new["number"])) or decision_at)
    started = answered(st, "start_workers", range(new["number"], new["number"] + 1))
    marks = worker_marks(st.rank0_lines(new["number"]))
    points = [
        ("decision", decision_at),
        ("stop", stopped),
        ("start", started),
        ("rendezvous", marks["joined"]),
        ("restore", marks["restored"]),
        ("first_step", new["first_step_at"]),
    ]
    phases: dict[str, float | None] = {}
    prev = fault_at
    for name, at in points:
        phases[name] = r3(at - prev) if at is not None else None
        prev = at if at is not None else prev
    return {
        "fault_to_first_step_s": r3(new["first_step_at"] - fault_at),
        "phases_s": phases,
        "restore_load_s": marks["load_s"],
        "resumed_from": new["resumed_from"],
        "generations": [old, new["number"]],
    }


def run_myolo_failover(workdir: Path, fault: str, job: TrainerJob, warm_steps: int = 30) -> dict[str, Any]:
    """``fault``: ``xid`` (XID 79 on the victim's GPU: a FAIL fault, cordon, shrink) or ``kill`` (the
    victim's agent and workers killed: the machine died)."""
    with Stack(workdir) as st:
        st.post("/v1/jobs", manifest(job, workdir / "ckpt").encode(), "application/yaml")
        before = st.wait("3 replicas training", training(3, steps=warm_steps), 180)
        old = before["generation"]
        fault_at = time.time()
        if fault == "xid":
            st.inject(VICTIM, "--gpu", "0", "--xid", "79")
            # the fault's own time (the agent's event), not this process's before the injecting CLI started
            faults = st.get(f"/v1/nodes/{VICTIM}")["recent_faults"]
            fault_at = max(f["time"] for f in faults if f.get("xid") == 79)
        else:
            st.kill_node(VICTIM)
        after = st.wait("the next generation's first step", training(2, old["number"]), 120)
        new = after["generation"]
        # the decision that made the generation which trained (an earlier one may have been abandoned)
        decision = next(d for d in reversed(after["decisions"]) if d["generation"] == new["number"])
        result = failover_phases(st, fault_at, old["number"], new, decision["time"])
        trained = [r.step for r in _records(st.rank0_lines(old["number"])) if isinstance(r, StepRecord)]
        result["steps_lost"] = max(0, max(trained, default=0) - new["resumed_from"])
        result["decisions"] = [
            {"t_s": r3(d["time"] - fault_at), "kind": d["kind"], "generation": d["generation"], "reason": d["reason"]}
            for d in after["decisions"]
            if d["time"] >= fault_at
        ]
        result["fault"] = fault
        return result


def _records(lines: list[str]) -> list[Any]:
    out = []
    for line in lines:
        rec = progress.parse(line)
        if rec is not None:
            out.append(rec)
    return out


def run_myolo_goodput(
    workdir: Path,
    job: TrainerJob,
    duration_s: float = 300.0,
    fault_every_s: float = 120.0,
    rejoin_timeout_s: float = 90.0,
) -> dict[str, Any]:
    """The job for ``duration_s`` from its first step, the victim node killed (agent and workers) every
    ``fault_every_s``; once the smaller job trains again (or after ``rejoin_timeout_s``) the node's agent is
    started again and uncordoned, as on the torchrun side a fresh agent replaces it. Goodput from rank 0's
    step records: the step time of the steps that count over the window's wall time."""
    with Stack(workdir) as st:
        applied = time.time()
        st.post("/v1/jobs", manifest(job, workdir / "ckpt").encode(), "application/yaml")
        st.wait("the first step", training(3), 180)
        start = time.time()
        faults: list[dict[str, float | None]] = []
        next_fault, pending = start + fault_every_s, None
        while time.time() < start + duration_s:
            now = time.time()
            if now >= next_fault:
                gen = st.job()["generation"]["number"]
                st.kill_node(VICTIM)
                pending = {"at_s": r3(now - start), "generation": gen, "rejoined_s": None}
                faults.append(pending)
                next_fault += fault_every_s
            if pending is not None:
                job_now = st.job()
                back = training(2, int(pending["generation"] or 0))(job_now)
                if back or time.time() - start - float(pending["at_s"] or 0) > rejoin_timeout_s:
                    st.restart_node(VICTIM)
                    st.post(f"/v1/nodes/{VICTIM}/uncordon", b'{"reason": "replaced"}', "application/json")
                    pending["rejoined_s"] = r3(time.time() - start)
                    pending = None
            time.sleep(0.5)
        end = time.time()
        job_now = st.job()
        completions: list[tuple[int, float]] = []
        layouts = []
        for number in range(1, job_now["generations"] + 1):
            for rec in _records(st.rank0_lines(number)):
                if isinstance(rec, StepRecord):
                    completions.append((rec.step, rec.step_time_s))
                elif isinstance(rec, StartRecord):
                    layouts.append(rec.layout)
        return {
            "duration_s": r3(end - start),
            "apply_to_first_step_s": r3(start - applied),
            "faults": faults,
            "generations": job_now["generations"],
            "layouts": layouts,
            "goodput": dataclasses.asdict(goodput(completions, end - start)),
            "decisions": [
                {"t_s": r3(d["time"] - start), "kind": d["kind"], "reason": d["reason"]} for d in job_now["decisions"]
            ],
        }


def main() -> None:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="Myolotrain's side of the elastic benchmark, alone")
    parser.add_argument("--fault", choices=("xid", "kill"), default="xid")
    parser.add_argument("--goodput", type=float, default=0.0, help="run goodput for this many seconds instead")
    args = parser.parse_args()
    from tests.benchmarks.elastic_torchrun import ELASTIC_JOB

    with tempfile.TemporaryDirectory(prefix="myolo-elastic-") as tmp:
        if args.goodput:
            out = run_myolo_goodput(Path(tmp), ELASTIC_JOB, args.goodput, fault_every_s=args.goodput / 2.5)
        else:
            out = run_myolo_failover(Path(tmp), args.fault, ELASTIC_JOB)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
