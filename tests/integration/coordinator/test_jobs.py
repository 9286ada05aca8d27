"""Elastic jobs end to end: the local stack (real Kafka, two coordinators, three agents with one simulated GPU
each), real trainer workers (gloo on the CPU), the coordinator's API as an operator's tools use it.

One stack, one story, each step asserted as it happens: a bad manifest refused naming its field; a job on 3
nodes; XID 79 on one of them -> cordon -> the job shrinks to 2 replicas and resumes where it stopped; the
leading coordinator killed -> the standby adopts the job and the workers train on; the node repaired and
uncordoned -> the job grows back to 3; an agent and its workers killed -> the node goes Lost -> the job
shrinks; a second job whose minReplicas cannot be met waits in Pending and starts once the first is
deleted. Last, the losses after the shrink are checked against an uninterrupted run at the new layout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from myolo.coordinator.cli.auth import stack_token
from myolo.coordinator.cli.main import app
from myolo.coordinator.localstack import stack
from myolo.coordinator.localstack.broker import LocalBroker, state
from tests.support.helpers import pids_mentioning

REPO = Path(__file__).resolve().parents[3]
RTOL = 1e-4  # fp32: the same math at a different reduction order, compounded over a few dozen steps

MANIFEST = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: {name}}}
spec:
  minReplicas: {lo}
  maxReplicas: 3
  replica: {{tp: 1, pp: 1}}
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: 3000}}, data: {{globalBatch: 12, seqLen: 64}}, runtime: {{seed: 0}}, checkpoint: {{every: 20, snapshotEvery: 1}}}}
  checkpointDir: {ckpt}
"""


class Api:
    def __init__(self, urls: list[str], token: str | None) -> None:
        self.urls = urls
        self.token = token  # the stack's admin token: its API authenticates every caller

    def call(
        self, method: str, path: str, body: bytes | None = None, ctype: str = "application/yaml"
    ) -> tuple[int, Any]:
        """The first coordinator that answers (writes go to the leader: a 307 is followed by hand)."""
        last: Exception | None = None
        for url in self.urls:
            target = f"{url}{path}"
            for _ in range(3):
                headers = {"Content-Type": ctype, "Authorization": f"Bearer {self.token}"}
                req = urllib.request.Request(target, data=body, method=method, headers=headers)
                try:
                    with urllib.request.urlopen(req, timeout=5) as resp:
                        return resp.status, json.loads(resp.read() or b"null")
                except urllib.error.HTTPError as exc:
                    if exc.code in (307, 308) and exc.headers.get("Location"):
                        target = exc.headers["Location"]
                        continue
                    return exc.code, json.loads(exc.read() or b"null")
                except OSError as exc:
                    last = exc
                    break
        raise AssertionError(f"no coordinator answered {method} {path}: {last}")

    def job(self, name: str) -> dict:
        status, body = self.call("GET", f"/v1/jobs/{name}")
        assert status == 200, body
        return body


def _until(what: str, check: Callable[[], Any], timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
        except AssertionError:
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.3)


def _running(api: Api, name: str, replicas: int, generation_above: int = 0, steps: int = 3) -> Callable[[], dict]:
    """A check: the job runs ``replicas`` replicas in a generation newer than ``generation_above`` and trained
    ``steps`` steps in it."""

    def check() -> dict | None:
        job = api.job(name)
        gen = job["generation"]
        ok = (
            job["phase"] == "Running"
            and gen["number"] > generation_above
            and gen["replicas"] == replicas
            and gen["resumed_from"] is not None
            and job["progress"]["step"] >= gen["resumed_from"] + steps
        )
        return job if ok else None

    return check


def _records(state_dir: Path, node: str, job: str, generation: int) -> list[dict]:
    log = state_dir / "agents" / node / "workers" / job / f"g{generation}" / "rank-0.log"
    out = []
    for line in log.read_text().splitlines():
        if line.startswith("@myolo "):
            out.append(json.loads(line[len("@myolo ") :]))
    return out


def _steps(records: list[dict]) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records if r.get("event") == "step"}


def _inject(record: state.ProcessRecord, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "myolo.agent", "inject", "--socket", record.info["socket"], *args],
        cwd=REPO,
        check=True,
        capture_output=True,
    )


def _leader(records: dict[str, state.ProcessRecord]) -> str:
    from myolo.coordinator.localstack.health import coordinator_health

    return next(
        n for n, r in records.items() if r.role == "coordinator" and coordinator_health(r.info["api_url"]) == "leader"
    )


def _reference(last: int) -> dict[int, float]:
    """An uninterrupted run of the same job (same steps, so the same learning-rate schedule) at 2 replicas
    (myolo-train, real gloo processes), read until it finished step ``last``."""
    args = ["--model", "tiny", "--steps", "3000", "--seed", "0", "--global-batch", "12", "--seq-len", "64"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "myolo.kernels.cli.launch", *args, "--nproc", "2", "--dp", "2", "--json"],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    records: list[dict] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                records.append(json.loads(line))
                if records[-1].get("event") == "step" and records[-1]["step"] >= last:
                    break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    losses = _steps(records)
    assert last in losses, f"the reference run ended before step {last}: {sorted(losses)[-3:]}"
    return losses


@pytest.mark.kafka
def test_an_elastic_job_shrinks_survives_failover_grows_and_waits_for_capacity(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path, tied_to_parent=True)
    try:
        broker.start(timeout=120)
        stack.start_members(tmp_path, coordinators=2, nodes=3, gpus=1, timeout=120, progress=lambda _: None)
        records = {p.name: p for p in state.load(tmp_path).processes}
        urls = [r.info["api_url"] for r in records.values() if r.role == "coordinator"]
        token = stack_token(tmp_path)
        stack.wait_fleet(urls, ["node-1", "node-2", "node-3"], 90, token)
        api = Api(urls, token)
        ckpt = tmp_path / "ckpt"

        # a bad manifest is refused, naming the field, and nothing is created
        bad = MANIFEST.format(name="bad", lo=4, ckpt=ckpt).encode()
        status, body = api.call("POST", "/v1/jobs", bad)
        assert status == 400 and body["field"] == "spec.maxReplicas", body
        assert api.call("GET", "/v1/jobs")[1]["items"] == []

        # the job runs on the three nodes
        status, body = api.call("POST", "/v1/jobs", MANIFEST.format(name="tiny", lo=1, ckpt=ckpt / "tiny").encode())
        assert status == 201, body
        job = _until("3 replicas training", _running(api, "tiny", 3), timeout=120)
        assert [m["node_id"] for m in job["generation"]["members"]] == ["node-1", "node-2", "node-3"]
        g1 = job["generation"]["number"]

        # XID 79 on node-2: cordoned, the job shrinks to 2 replicas and resumes where it stopped
        _inject(records["node-2"], "--gpu", "0", "--xid", "79")
        job = _until("the shrink to 2 replicas", _running(api, "tiny", 2, g1), timeout=120)
        g2 = job["generation"]
        assert [m["node_id"] for m in g2["members"]] == ["node-1", "node-3"]
        shrink = next(d for d in reversed(job["decisions"]) if d["kind"] == "shrink")
        assert shrink["reason"].startswith("node-2 ") and "xid 79" in shrink["reason"].lower()  # cordon or health
        trained = _steps(_records(tmp_path, "node-1", "tiny", g1))
        # no step trained twice beyond the snapshot interval (1): it resumes right after the last step trained
        assert g2["resumed_from"] >= max(trained) - 1, (g2["resumed_from"], max(trained))

        # kill -9 the leading coordinator: the standby adopts the job, its workers train on
        leader = _leader(records)
        os.kill(records[leader].pid, signal.SIGKILL)
        standby = next(n for n, r in records.items() if r.role == "coordinator" and n != leader)
        api = Api([records[standby].info["api_url"]], token)
        step = job["progress"]["step"]
        job = _until(
            "the standby to adopt the job",
            lambda: (
                (j := api.job("tiny"))["decisions"][-1]["kind"] == "adopt" and j["progress"]["step"] > step + 5 and j
            ),
            timeout=60,
        )
        assert job["generation"]["number"] == g2["number"] and job["phase"] == "Running"
        assert f"by {standby}" in job["decisions"][-1]["reason"]

        # node-2 repaired and uncordoned: the job grows back to 3 replicas
        _inject(records["node-2"], "--clear")
        status, body = api.call("POST", "/v1/nodes/node-2/uncordon", b'{"reason": "GPU reset"}', "application/json")
        assert status == 200, body
        job = _until("the growth back to 3 replicas", _running(api, "tiny", 3, g2["number"]), timeout=120)
        grow = next(d for d in reversed(job["decisions"]) if d["kind"] == "grow")
        assert "capacity for 3 replica(s)" in grow["reason"]
        g3 = job["generation"]["number"]

        # node-3's agent and workers killed (the machine died): Lost, and the job shrinks without it
        for pid in [records["node-3"].pid, *pids_mentioning(str(tmp_path / "agents" / "node-3" / "workers"))]:
            os.kill(pid, signal.SIGKILL)
        job = _until("the shrink after node-3 was lost", _running(api, "tiny", 2, g3), timeout=120)
        assert [m["node_id"] for m in job["generation"]["members"]] == ["node-1", "node-2"]

        # a job that needs 2 replicas while both live nodes are taken waits in Pending, then starts
        status, body = api.call("POST", "/v1/jobs", MANIFEST.format(name="second", lo=2, ckpt=ckpt / "second").encode())
        assert status == 201, body
        pending = _until(
            "the second job to wait",
            lambda: (j := api.job("second"))["phase"] == "Pending" and "capacity" in j["reason"] and j,
            timeout=30,
        )
        assert "minReplicas 2" in pending["reason"] and "0 free GPU(s)" in pending["reason"]
        status, body = api.call("DELETE", "/v1/jobs/tiny", b"{}", "application/json")
        assert status == 202, body
        _until("the second job to run", _running(api, "second", 2), timeout=120)
        status, _ = api.call("GET", "/v1/jobs/tiny")
        assert status == 404

        # `myoloctl profile start`: a flame graph of rank 1, taken by py-spy on its node, shows the step
        flame = tmp_path / "flame.html"
        profiled = CliRunner().invoke(
            app,
            ["profile", "start", "--job", "second", "--rank", "1", "--duration", "3s", "-o", str(flame)],
            env={"MYOLO_STATE_DIR": str(tmp_path), "MYOLO_API": api.urls[0]},
        )
        assert profiled.exit_code == 0, profiled.output
        assert "samples of rank 1 of job second" in profiled.output and "train_step" in flame.read_text()

        # the losses after the shrink continue an uninterrupted run at 2 replicas
        after = _steps(_records(tmp_path, "node-1", "tiny", g2["number"]))
        first = g2["resumed_from"] + 1
        check = [s for s in range(first, first + 8) if s in after]
        assert len(check) == 8, sorted(after)[:10]
        want = _reference(check[-1])
        for s in check:
            assert abs(after[s] - want[s]) <= RTOL * abs(want[s]), (s, after[s], want[s])
    finally:
        stack.stop_members(tmp_path, progress=lambda _: None)
        broker.stop()
        for pid in pids_mentioning(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
        broker.clean()


def test_manifest_errors_read_like_the_issue() -> None:
    from myolo.coordinator.jobs.manifest import ManifestError, parse_manifest

    with pytest.raises(ManifestError, match=re.escape("spec.maxReplicas: must be >= minReplicas (4)")):
        parse_manifest(MANIFEST.format(name="x", lo=4, ckpt="/c"))
