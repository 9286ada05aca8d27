"""A release that cannot start never bricks a node: its launcher takes it back, the rollout stops at wave 1.

Real Kafka, one coordinator, three agents under their launchers (as the systemd unit runs them), all of it
real processes. Three wheels of this project at new versions, each broken in a way a release can be: it
raises at import, it runs but never becomes READY, it becomes READY and then hangs (its watchdog stops).
Each is rolled out with ``myoloctl rollout start``; each ends with node-1 Ready on the version it ran before
with no hand on it, the rollout RolledBack naming node-1 and the cause, and node-2 and node-3 never sent the
release. The same for a trainer release whose workers cannot import, under a training job: the first
``start_workers`` on it fails, the wave fails, node-1 goes back to the trainer it had and rejoins the job. The
wall time of each is printed (the figures of the issue note and docs/rollouts.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import myolo
from myolo.coordinator.localstack.broker import LocalBroker, state
from tests.support.coordinator import local
from tests.support.helpers import poll_until
from tests.support.wheel import build_project_wheel

HANG_AFTER_READY = """
_ready_first = ready


async def ready(rt: Runtime) -> None:  # this release goes READY, then its event loop stops for good
    await _ready_first(rt)
    import time

    time.sleep(3600)
"""
NEVER_READY = """
async def ready(rt: Runtime) -> None:  # this release runs and publishes but never says READY
    await asyncio.Event().wait()
"""
COMMIT_S = 10  # the trial's commit window where the release never commits (the stack's own is 30 s)
BROKEN = {
    "4.0.9.dev1": (
        {"agent/daemon/main.py": 'raise RuntimeError("this release cannot start: broken at import")\n'},
        "RuntimeError: this release cannot start: broken at import",
    ),
    "4.0.9.dev2": ({"agent/daemon/loops.py": NEVER_READY}, f"the release did not commit itself within {COMMIT_S} s"),
    "4.0.9.dev3": ({"agent/daemon/loops.py": HANG_AFTER_READY}, "watchdog: no sign of life from the agent"),
}


@pytest.mark.kafka
@pytest.mark.timeout(900)
@pytest.mark.parametrize("version", list(BROKEN), ids=["raises-at-import", "never-ready", "hangs-after-ready"])
def test_a_release_that_cannot_start_is_taken_back_by_the_node_and_stops_the_rollout(
    tmp_path: Path, local_myoloctl, version: str
) -> None:
    myoloctl = local_myoloctl
    patch, cause = BROKEN[version]
    wheel = build_project_wheel(tmp_path / "build", version, append=patch)
    base = myolo.__version__
    broker = LocalBroker(tmp_path, tied_to_parent=True)
    try:
        broker.start(timeout=120)
        # only a release that never commits waits out the window: a short one for it, the stack's for the others
        window = {"commit_timeout_s": float(COMMIT_S)} if version == "4.0.9.dev2" else None
        records = local.start_members(tmp_path, coordinators=1, releases_extra=window)
        launchers = {n: records[n].pid for n in ("node-1", "node-2", "node-3")}
        began = time.monotonic()
        assert "3 waves of 1/1/1 node(s)" in start_rollout(myoloctl, "agent", version, wheel)

        def rollout() -> dict:
            return json.loads(myoloctl("rollout", "status", "-o", "json").output)

        rec = poll_until(
            "the rollout to end", lambda: (r := rollout())["phase"] in ("RolledBack", "Succeeded") and r, 400
        )
        wall = time.monotonic() - began
        assert rec["phase"] == "RolledBack", json.dumps(rec)[-3000:]
        assert "node-1" in rec["failed_gate"]["detail"], rec["failed_gate"]

        def named() -> dict | None:  # the gate may fail on Lost first; the node says why once it is back
            r = rollout()
            return r if cause in r["taken_back"].get("node-1", "") + r["failed_gate"]["detail"] else None

        rec = _until("the record to name the cause", named, 120, rollout)
        assert [w["nodes"] for w in rec["waves"]] == [["node-1"], ["node-2"], ["node-3"]]
        assert [round(w["percent"]) for w in rec["waves"]] == [33, 67, 100]
        assert all(not w["commands"] for w in rec["waves"][1:])  # no node outside wave 1 was sent it

        def nodes() -> dict:
            return {n["node_id"]: n for n in json.loads(myoloctl("get", "nodes", "-o", "json").output)["items"]}

        def back() -> dict | None:
            one = (found := nodes())["node-1"]
            ok = one["liveness"] == "Ready" and one["agent_version"] == base and not one["agent_on_trial"]
            return found if ok and not (one.get("cordon") or {}).get("cordoned") else None

        found = _until(f"node-1 Ready on {base} again, uncordoned", back, 120, lambda: nodes()["node-1"])
        back_at = time.monotonic() - began
        failed = found["node-1"]["failed_releases"]
        assert [(f["component"], f["version"], f["tries"]) for f in failed] == [("agent", version, 3)]
        agents = tmp_path / "agents"
        assert not (agents / "node-1" / "releases" / "agent" / "current").exists()  # its base install
        for other in ("node-2", "node-3"):
            assert not (agents / other / "releases" / "agent" / version).exists()
            assert found[other]["agent_version"] == base
        # the same launchers throughout: nobody restarted a node by hand
        now = {p.name: p.pid for p in state.load(tmp_path).processes if p.name in launchers}
        assert now == launchers
        # and the stack still knows where node-1 answers, though its agent restarted on another port
        again = local.start_members(tmp_path, coordinators=1)
        assert again["node-1"].info["health_url"] == found["node-1"]["health_url"]
        print(
            f"\n{version}: rollout RolledBack {wall:.1f} s after its start; node-1 Ready on {base} at {back_at:.1f} s"
        )
    finally:
        local.stop_all(tmp_path, broker)


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_a_trainer_release_whose_workers_cannot_import_fails_its_wave_and_the_node_rejoins_the_job(
    tmp_path: Path, local_myoloctl
) -> None:
    myoloctl = local_myoloctl
    version, cause = "4.0.9.dev4", "RuntimeError: this trainer cannot start: broken at import"
    broken = {"kernels/__init__.py": 'raise RuntimeError("this trainer cannot start: broken at import")\n'}
    wheel = build_project_wheel(tmp_path / "build", version, append=broken)
    broker = LocalBroker(tmp_path, tied_to_parent=True)
    try:
        broker.start(timeout=120)
        local.start_members(tmp_path, coordinators=1)
        (tmp_path / "job.yaml").write_text(local.steady_job("steady", tmp_path / "ckpt"))
        assert (out := myoloctl("apply", "-f", str(tmp_path / "job.yaml"))).exit_code == 0, out.output

        def job() -> dict:
            return json.loads(myoloctl("get", "job", "steady", "-o", "json").output)

        def on_every_node() -> dict | None:
            gen = (j := job()).get("generation") or {}
            nodes = sorted(m["node_id"] for m in gen.get("members", []))
            return j if gen.get("stage") == "running" and nodes == list(local.NODES) else None

        before = _until("the job on 3 nodes", on_every_node, 300, job)["generation"]["number"]
        began = time.monotonic()
        start_rollout(myoloctl, "trainer", version, wheel)

        def rollout() -> dict:
            return json.loads(myoloctl("rollout", "status", "-o", "json").output)

        rec = _until(
            "the rollout to end", lambda: (r := rollout())["phase"] in ("RolledBack", "Succeeded") and r, 600, rollout
        )
        wall = time.monotonic() - began
        assert rec["phase"] == "RolledBack", json.dumps(rec)[-3000:]
        detail = rec["failed_gate"]["detail"]
        assert detail.startswith("node-1: ") and cause in detail, detail  # its failed upgrade, or the node's word

        def named() -> dict | None:
            said = rollout()["taken_back"].get("node-1", "")
            return said if said.startswith(f"switched trainer {version} back to its base install by itself") else None

        said = _until("the record to say what node-1 did", named, 120, rollout)
        assert "its job check could not run" in said and cause in said, said
        assert [w["nodes"] for w in rec["waves"]] == [["node-1"], ["node-2"], ["node-3"]]
        assert all(not w["commands"] for w in rec["waves"][1:])  # no node outside wave 1 was sent it

        def nodes() -> dict:
            return {n["node_id"]: n for n in json.loads(myoloctl("get", "nodes", "-o", "json").output)["items"]}

        def back() -> dict | None:
            one = (found := nodes())["node-1"]
            ok = one["liveness"] == "Ready" and one["failed_releases"]
            return found if ok and not (one.get("cordon") or {}).get("cordoned") else None

        found = _until("node-1 Ready and uncordoned", back, 120, lambda: nodes()["node-1"])
        failed = found["node-1"]["failed_releases"]
        assert [(f["component"], f["version"], f["tries"]) for f in failed] == [("trainer", version, 1)]
        agents = tmp_path / "agents"
        assert not (agents / "node-1" / "releases" / "trainer" / "current").exists()  # its base install
        for other in ("node-2", "node-3"):
            assert not (agents / other / "releases" / "trainer" / version).exists()
        # node-1 trains again, on the trainer it had, with the others
        again = _until("the job on 3 nodes again", on_every_node, 300, job)
        assert again["generation"]["number"] > before
        print(
            f"\ntrainer {version}: rollout RolledBack {wall:.1f} s after its start; "
            f"the job on 3 nodes again at {time.monotonic() - began:.1f} s"
        )
    finally:
        local.stop_all(tmp_path, broker)


def start_rollout(myoloctl: Callable[..., Any], component: str, version: str, wheel: Path) -> str:
    """``myoloctl rollout start`` of ``wheel`` with a 20 s bake; its output."""
    out = myoloctl(
        "rollout", "start", "--component", component, "--version", version, "--artifact", str(wheel), "--bake", "20s"
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    return out.output


def _until(what: str, check: Callable[[], Any], timeout: float, state_of: Callable[[], Any]) -> Any:
    """``poll_until``; a timeout also says what ``state_of`` shows then."""
    try:
        return poll_until(what, check, timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it stands as: {json.dumps(state_of())[-3000:]}") from None
