"""A good release of the agent rolls through every wave on the local stack while a job keeps training.

Real Kafka, two coordinators, three agents (one simulated GPU each) and real trainer workers; the release is a
wheel of this project built offline at another version. Three nodes make three waves of one (5/20/50/100 %).
Each wave: cordon (the job shrinks away), signed upgrade (the agent installs the wheel beside its code and
re-executes into it), back Ready on the new version, uncordon (the job grows back), bake, gates. The leading
coordinator is killed -9 in the middle: the standby resumes the rollout where it was. The rollout's wall
time and the job's throughput during it are printed (the figures of docs/benchmarks.md), with the timeline of
every wave's steps; a wait that fails prints where the rollout stood (``rollout_trace.py``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from statistics import fmean
from typing import Any

import pytest

from myolo.coordinator.cli.auth import stack_token
from myolo.coordinator.localstack.broker import LocalBroker
from tests.support.coordinator import local
from tests.support.coordinator.rollout_trace import RolloutTrace
from tests.support.helpers import poll_until
from tests.support.wheel import build_project_wheel

NEW = "4.0.1.dev0"


def _until(
    what: str,
    check: Callable[[], Any],
    timeout: float,
    tick: Callable[[], None] | None = None,
    trace: RolloutTrace | None = None,
) -> Any:
    """``poll_until``; with a ``trace``, a timeout also says where the rollout stood and how it got there."""
    try:
        return poll_until(what, check, timeout, tick)
    except AssertionError as exc:
        if trace is None:
            raise
        raise AssertionError(f"{exc}\n{trace.report()}") from None


@pytest.mark.kafka
def test_a_good_agent_release_rolls_through_every_wave_while_a_job_trains(tmp_path: Path, local_myoloctl) -> None:
    myoloctl = local_myoloctl
    wheel = build_project_wheel(tmp_path / "build", NEW)
    broker = LocalBroker(tmp_path, tied_to_parent=True)
    try:
        broker.start(timeout=120)
        records = local.start_members(tmp_path, coordinators=2)
        job_file = tmp_path / "steady.yaml"
        job_file.write_text(local.steady_job("steady", tmp_path / "ckpt"))
        applied = _until(
            "a leader to take the job", lambda: (a := myoloctl("apply", "-f", str(job_file))).exit_code == 0 and a, 60
        )
        assert applied.exit_code == 0, applied.output

        def job() -> dict:
            return json.loads(myoloctl("get", "job", "steady", "-o", "json").output)

        def training(replicas: int) -> Callable[[], bool]:
            def check() -> bool:
                j = job()
                gen = j.get("generation") or {}
                return gen.get("stage") == "running" and gen.get("replicas") == replicas and bool(j.get("progress"))

            return check

        _until("the job on 3 replicas", training(3), 180)
        rates: list[tuple[float, float, int]] = []  # (time, per-replica tokens/s, replicas) while it trains

        trace = RolloutTrace(myoloctl, records, stack_token(tmp_path), "steady")

        def watch() -> None:
            trace.sample()
            j = trace.last.get("job") or {}
            p, gen = j.get("progress") or {}, j.get("generation") or {}
            if p.get("tokens_per_s") and gen.get("stage") == "running":
                rates.append((time.monotonic(), p["tokens_per_s"], gen.get("replicas", 0)))

        for _ in range(10):  # a baseline before the rollout
            watch()
            time.sleep(0.5)
        baseline = fmean(r for _, r, _ in rates)

        began = trace.restart()
        start = myoloctl(
            "rollout", "start", "--component", "agent", "--version", NEW, "--artifact", str(wheel),
            "--bake", "15s", "--throughput-tolerance", "0.5",
        )  # fmt: skip
        assert start.exit_code == 0, start.output
        assert "3 waves of 1/1/1 node(s)" in start.output

        def rollout() -> dict:
            return json.loads(myoloctl("rollout", "status", "-o", "json").output)

        def wave_1_passed() -> bool:
            r = rollout()
            ended = r.get("wave", 0) < 1 and r.get("phase") in ("RollingBack", "RolledBack", "Aborted")
            assert not ended, f"the rollout is {r['phase']} in wave 1: {r.get('reason')}"
            return r.get("wave", 0) >= 1

        # the first wave passes; then the leader is killed while the second is under way
        _until("wave 1 to pass", wave_1_passed, 240, watch, trace)
        leader = next(
            n
            for n, r in records.items()
            if r.role == "coordinator" and '"leader"' in _health(myoloctl, r.info["api_url"])
        )
        os.kill(records[leader].pid, signal.SIGKILL)
        rec = _until(
            "the rollout to succeed",
            lambda: (r := rollout())["phase"] in ("Succeeded", "RolledBack") and r,
            420,
            watch,
            trace,
        )
        wall = time.monotonic() - began
        assert rec["phase"] == "Succeeded", f"{json.dumps(rec, indent=1)[-3000:]}\n{trace.report()}"
        assert [w["step"] for w in rec["waves"]] == ["passed", "passed", "passed"]
        assert any("leader" in h.get("reason", "") or h["by"] for h in rec["history"])
        nodes = json.loads(myoloctl("get", "nodes", "-o", "json").output)["items"]
        assert {n["node_id"]: n["agent_version"] for n in nodes} == {f"node-{i}": NEW for i in (1, 2, 3)}
        assert not any(n.get("cordon", {}) and n["cordon"].get("cordoned") for n in nodes)
        for i in (1, 2, 3):
            current = tmp_path / "agents" / f"node-{i}" / "releases" / "agent" / "current"
            assert current.is_symlink() and current.resolve().name == NEW
        # the job kept training: it never stopped for good, and grew back to 3 replicas
        _until("the job back on 3 replicas", training(3), 120, watch, trace)
        during = [r for t, r, _ in rates if t >= began]
        print(
            f"\nrollout wall time {wall:.1f} s; per-replica tokens/s before {baseline:.0f}, during: mean "
            f"{fmean(during):.0f} ({fmean(during) / baseline - 1:+.1%}), min {min(during):.0f} "
            f"({min(during) / baseline - 1:+.1%}); replicas seen {sorted({n for _, _, n in rates})}\n"
            f"steps (s since the rollout started):\n{trace.steps()}"
        )
    finally:
        local.stop_all(tmp_path, broker)


def _health(myoloctl, url: str) -> str:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return ""
