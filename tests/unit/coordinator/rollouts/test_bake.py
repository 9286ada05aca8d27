"""A wave's bake judges the jobs it displaced on their training after they came back, not through the restart
the uncordon made them take: a good release passes however long that restart is; a release after which a job
never trains again still fails the throughput gate, once ``upgrade_timeout_s`` is out. The window functions
on their own, then on the real rollouts and jobs components (simulated time, agents played by the test)."""

from __future__ import annotations

import pytest

from myolo.coordinator.jobs.interface import Training
from myolo.coordinator.rollouts import bake
from myolo.coordinator.rollouts.config import Plan
from tests.support.coordinator.jobs_sim import manifest
from tests.unit.coordinator.rollouts import test_component
from tests.unit.coordinator.rollouts.test_component import NEW, NODES, SHA, FleetSim


def job(name: str, stage: str | None, first_step_at: float | None = None) -> Training:
    """A live job as the jobs component answers it (``stage`` None: not placed yet)."""
    nodes = ("n1",) if stage else ()
    return Training(
        job=name, nodes=nodes, running=stage == "running", first_step_at=first_step_at, tokens_per_s=None, reported=None
    )


def test_a_job_s_window_starts_at_its_first_step_after_the_upgrade() -> None:
    jobs = [
        job("kept", "running", 50.0),  # trained before the upgrade (at 100) on the layout it still runs
        job("back", "running", 130.0),  # restarted and trained again
        job("restarting", "starting"),
        job("no-step-yet", "running"),
        job("unplaced", None),
    ]  # an ended job is not among the live ones
    names = [j.job for j in jobs] + ["ended", "deleted"]
    assert bake.window_starts(jobs, names, 100.0) == {
        "kept": 100.0,
        "back": 130.0,
        "restarting": None,
        "no-step-yet": None,
        "unplaced": None,
        "ended": 100.0,
        "deleted": 100.0,
    }


@pytest.mark.parametrize(
    ("starts", "now", "over"),
    [
        ({}, 110.0, True),  # no job to judge: the bake is the plan's
        ({"a": 100.0}, 109.9, False),
        ({"a": 100.0}, 110.0, True),
        ({"a": 130.0}, 139.9, False),  # bake_s after it trained again, not after the upgrade
        ({"a": 130.0}, 140.0, True),
        ({"a": 100.0, "b": None}, 150.0, False),  # b is not back yet
        ({"a": 100.0, "b": None}, 160.0, True),  # upgrade_timeout_s is out: judged on what it reported
    ],
)
def test_the_bake_is_over_when_every_job_trained_bake_s_or_the_wait_is_out(
    starts: dict[str, float | None], now: float, over: bool
) -> None:
    assert bake.over(starts, 100.0, now, bake_s=10.0, timeout_s=60.0) is over


async def _roll(sim: FleetSim, plan: Plan, restart_s: float, trains_after_upgrade: bool = True) -> None:
    """Run the rollout to its end; a generation reports progress only ``restart_s`` after it started (the
    workers' start-up), and none at all after the first upgrade unless ``trains_after_upgrade``."""
    await sim.jobs.apply(manifest(name="train", lo=1, hi=len(NODES)), "alice")
    step = 0
    for _ in range(60):  # its first generation, then a baseline before the rollout
        await sim.run(1)
        if (g := sim.job("train").status.generation) and g.stage == "running":
            step += 1
            await sim.progress("train", g.number, step, g.replicas)
            if step > plan.baseline_s:
                break
    assert step > plan.baseline_s, sim.job("train")
    rec = await sim.rollouts.start("agent", NEW, "/srv/myolotrain-4.1.0-py3-none-any.whl", SHA, "op", plan)
    for _ in range(600):
        if sim.rollouts.rollout(rec.name).terminal:
            return
        await sim.run(1)
        gen = sim.job("train").status.generation
        if not trains_after_upgrade and sim.upgraded():
            continue
        if gen is not None and gen.stage == "running" and sim.clock.now() - (gen.started or 0) >= restart_s:
            step += 1
            await sim.progress("train", gen.number, step, gen.replicas)
    raise AssertionError(f"the rollout did not end: {sim.rollouts.rollout(rec.name)}")


sim = test_component.sim  # the fixture: the fleet of five simulated agents
PLAN = Plan(waves=[50, 100], bake_s=10, baseline_s=30, drain_timeout_s=30, upgrade_timeout_s=120)


async def test_a_good_release_passes_though_the_job_takes_longer_than_the_bake_to_grow_back(sim: FleetSim) -> None:
    await _roll(sim, PLAN, restart_s=3 * PLAN.bake_s)  # each restart outlasts the bake
    (rec,) = sim.rollouts.rollouts()
    assert rec.status.phase == "Succeeded", (rec.status.reason, rec.status.waves)
    displaced = [w for w in rec.status.waves if "train" in w.baseline]
    assert displaced  # a wave took the job's nodes
    for wave in displaced:
        (gate,) = [g for g in wave.gates if g.gate == "throughput"]
        assert gate.passed and abs(gate.figures["train"]) < 1e-9, gate  # judged on its training, at its rate
    assert sim.version == dict.fromkeys(NODES, NEW)


async def test_a_job_that_never_trains_again_fails_the_throughput_gate_once_the_wait_is_out(sim: FleetSim) -> None:
    await _roll(sim, PLAN, restart_s=0, trains_after_upgrade=False)
    (rec,) = sim.rollouts.rollouts()
    assert rec.status.phase == "RolledBack" and rec.status.failed_gate is not None, rec.status.reason
    assert (
        rec.status.failed_gate.gate == "throughput"
        and "train reported no progress during the bake" in rec.status.failed_gate.detail
    )
    wave = next(w for w in rec.status.waves if w.step == "failed")
    assert wave.upgraded_at is not None and "train" in wave.baseline  # the wave that displaced the job
    failed = next(h.time for h in rec.status.history if h.phase == "RollingBack")
    assert failed - wave.upgraded_at >= PLAN.upgrade_timeout_s  # it waited for the job to come back
    assert failed - wave.upgraded_at < PLAN.upgrade_timeout_s + 5  # and no longer
