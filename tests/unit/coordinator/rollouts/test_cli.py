"""`myoloctl rollout ...` against a leading coordinator's real API on a real port (no broker: its writes are
recorded): start (admin; the artifact's SHA-256 computed here), status, history, pause, resume, abort."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from myolo.coordinator.rollouts.component import Rollouts
from myolo.events.bus import RecordInfo
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, NodeSample
from tests.support.api_auth import ADMIN
from tests.support.coordinator.registry import Leading
from tests.support.coordinator.served import myoloctl, serve


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Leading, str]]:
    lead = await Leading(tmp_path).lead()
    for i in range(1, 5):
        gpus = [GpuReading(index=0, uuid=f"n{i}-0", name="sim")]
        sample = NodeSample(node_id=f"n{i}", backend="sim", gpus=gpus, seq=1, agent_version="4.0.0")
        await lead.coord.router(new_event(sample, f"/x/n{i}", clock=lead.clock), RecordInfo("t", 0, 0))
    async with serve(lead.coord) as url:
        yield lead, url


async def test_start_status_pause_resume_abort_and_history(served, tmp_path: Path) -> None:
    lead, url = served
    wheel = tmp_path / "myolotrain-4.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK wheel bytes")
    args = ("rollout", "start", "--component", "agent", "--version", "4.1.0", "--artifact", str(wheel))
    refused = await myoloctl(url, *args)  # an operator may not install software on every node
    assert refused.exit_code != 0 and "admin" in refused.output
    bad = await myoloctl(url, *args, "--waves", "50,20", who=ADMIN)
    assert bad.exit_code == 2 and "waves" in bad.output
    done = await myoloctl(url, *args, "--waves", "25,100", "--bake", "1h", who=ADMIN)
    assert done.exit_code == 0, done.output
    assert "rollout agent-4.1.0 started: 2 waves of 1/3 node(s)" in done.output
    rec = lead.coord.get(Rollouts).rollout("agent-4.1.0")
    assert rec.spec.sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest() and rec.spec.plan.bake_s == 3600
    assert rec.spec.by == f"operator:{ADMIN}"

    status = await myoloctl(url, "rollout", "status")
    assert status.exit_code == 0 and "agent-4.1.0: agent 4.1.0  Progressing" in status.output, status.output
    assert "n1" in status.output and "pending" in status.output
    paused = await myoloctl(url, "rollout", "pause", "agent-4.1.0")
    assert paused.exit_code == 0 and "Paused" in paused.output
    again = await myoloctl(url, "rollout", "pause", "agent-4.1.0")
    assert again.exit_code == 2 and "cannot pause rollout agent-4.1.0: it is Paused" in again.output
    assert (await myoloctl(url, "rollout", "resume", "agent-4.1.0")).exit_code == 0
    aborted = await myoloctl(url, "rollout", "abort", "agent-4.1.0")
    assert aborted.exit_code == 0 and "Aborted" in aborted.output  # nothing was upgraded: nothing to undo
    watched = await myoloctl(url, "rollout", "status", "agent-4.1.0", "-w")  # ended: returns at once
    assert watched.exit_code == 0 and "Aborted" in watched.output
    listing = await myoloctl(url, "rollout", "history")
    assert listing.exit_code == 0 and "agent-4.1.0" in listing.output and "Aborted" in listing.output
    as_json = json.loads((await myoloctl(url, "rollout", "history", "-o", "json")).output)
    assert [r["phase"] for r in as_json["items"]] == ["Aborted"]
    unknown = await myoloctl(url, "rollout", "undo", "nope")
    assert unknown.exit_code == 2 and "no rollout named 'nope'" in unknown.output
