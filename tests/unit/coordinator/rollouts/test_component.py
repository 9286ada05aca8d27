"""The rollouts component on a real (offline) coordinator with the real fleet, cordons, commands and jobs
components: simulated time, Kafka's writes recorded, the agents played by the test (they install what they
are told and report the version they run). A good release rolls through every wave while a job trains; a bad
one (failing its health, or leaking) stops after the first wave and is rolled back, and no node outside the
first wave is ever sent it; pause, resume, abort and undo."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.core.leadership import LeaderTerm
from myolo.coordinator.rollouts.component import Rollouts
from myolo.coordinator.rollouts.config import Plan
from myolo.coordinator.rollouts.interface import RolloutError
from myolo.coordinator.rollouts.records import STATE_ROLLOUTS, RolloutRecord
from myolo.events.payloads import Command, FailedRelease, GpuReading, LeakReport, NodeSample
from myolo.events.payloads.models import RolloutPhaseChanged
from tests.support.coordinator.jobs_sim import JobSim, manifest

NODES = ("n1", "n2", "n3", "n4", "n5")
OLD, NEW = "4.0.0", "4.1.0"
SHA = "ab" * 32
PLAN = Plan(waves=[20, 60, 100], bake_s=60, baseline_s=30, drain_timeout_s=30, upgrade_timeout_s=30)


class FleetSim(JobSim):
    """Agents that run a version, install what an upgrade or rollback names, and may be made sick by it."""

    def __init__(self, tmp_path, **env: str) -> None:
        super().__init__(tmp_path, nodes=NODES, **env)
        self.version = dict.fromkeys(NODES, OLD)
        self.health: dict[str, str] = {}
        self.bad_versions: set[str] = set()  # a node running one of these reports FAIL health
        self.failed: dict[str, list[FailedRelease]] = {}  # releases a node switched back from by itself
        self.on_trial: dict[str, str] = {}  # node -> the release it runs on trial, not committed yet

    async def sample(self, node: str) -> None:
        self.seq[node] = self.seq.get(node, 0) + 1
        health = "fail" if self.version[node] in self.bad_versions else "ok"
        gpus = [GpuReading(index=0, uuid=f"{node}-0", name="sim", util_gpu=50.0)]
        s = NodeSample(
            node_id=node,
            backend="sim",
            gpus=gpus,
            seq=self.seq[node],
            agent_version=self.version[node],
            health=health,
            failed_releases=self.failed.get(node, []),
            agent_on_trial=self.on_trial.get(node),
        )
        if health == "fail":
            s = msgspec.structs.replace(s, health_reasons=["health check failed after the upgrade"])
        await self.deliver(s, f"/x/{node}")

    async def agents(self) -> None:
        """Each agent does what it was told: install/switch (ack done with the previous version), workers."""
        for c in self.unanswered("upgrade") + self.unanswered("rollback"):
            before = self.version[c.node_id]
            self.version[c.node_id] = c.args["version"]
            await self.ack_result(
                c, {"component": c.args["component"], "version": c.args["version"], "previous": before}
            )
        await self.ack_all("stop_workers")
        await self.ack_all("start_workers")
        await self.ack_all("drain")

    def take_back(self, node: str, component: str, tries: int, error: str) -> None:
        """The node switched NEW back to OLD by itself (its trial failed) and says so from now on."""
        failed = FailedRelease(
            component=component, version=NEW, restored=OLD, tries=tries, error=error, at=self.clock.now()
        )  # type: ignore[arg-type]
        self.failed[node] = [failed]

    def unanswered(self, action: str) -> list[Command]:
        out = []
        for c in self.sent(action):
            intent = self.commands.intent(c.command_id)
            if intent is not None and not intent.terminal and c.node_id not in self.dead:
                out.append(c)
        return out

    async def ack_result(self, command: Command, result: dict[str, Any]) -> None:
        from myolo.events.payloads import CommandAck

        ack = CommandAck(
            command_id=command.command_id, node_id=command.node_id, epoch=command.epoch, status="done", result=result
        )
        await self.deliver(ack, f"/x/{command.node_id}")

    async def run(self, seconds: int, job: str | None = None, rate: float = 1000.0) -> None:
        for t in range(seconds):
            await self.agents()
            if (
                job is not None
                and self.jobs.job(job)
                and (gen := self.job(job).status.generation)
                and gen.stage == "running"
            ):
                await self.progress(job, gen.number, 1 + t, gen.replicas, tokens_per_s=rate)
            await self.second()

    @property
    def rollouts(self) -> Rollouts:
        return self.coord.get(Rollouts)

    def events(self) -> list[RolloutPhaseChanged]:
        return [d for k, d in self.writes if k == "send" and isinstance(d, RolloutPhaseChanged)]

    def upgraded(self) -> set[str]:
        return {c.node_id for c in self.sent("upgrade")}


@pytest.fixture
async def sim(tmp_path):
    s = FleetSim(tmp_path, MYOLO_JOBS_GROW_COOLDOWN_S="5")
    await s.start()
    await s.second(2)
    yield s
    await s.close()


async def start(sim: FleetSim, plan: Plan = PLAN) -> RolloutRecord:
    return await sim.rollouts.start("agent", NEW, "/srv/releases/myolotrain-4.1.0-py3-none-any.whl", SHA, "op", plan)


async def test_a_good_release_rolls_through_every_wave_while_a_job_trains(sim: FleetSim) -> None:
    await sim.jobs.apply(manifest(name="train", lo=1, hi=2), "alice")
    await sim.run(5, "train")
    busy = set(sim.job("train").status.generation.node_ids)
    rec = await start(sim)
    assert [len(w.nodes) for w in rec.status.waves] == [1, 2, 2]  # 20 % of 5, then 60 %, then the rest
    assert not busy & set(rec.status.waves[0].nodes)  # nodes without running jobs go first
    assert busy <= set(rec.status.waves[-1].nodes) | set(rec.status.waves[1].nodes)
    for _ in range(20):
        await sim.run(30, "train")
        if sim.rollouts.rollout(rec.name).terminal:
            break
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "Succeeded", (rec.status.reason, rec.status.waves)
    assert sim.version == dict.fromkeys(NODES, NEW)
    assert all(w.step == "passed" for w in rec.status.waves)
    for wave in rec.status.waves:
        assert [g.gate for g in wave.gates] == ["health", "faults", "leak", "throughput"]
        assert wave.previous == dict.fromkeys(wave.nodes, OLD)
    # the job's throughput held (the agents report the same rate): the gate judged it where the job ran
    judged = [g for w in rec.status.waves for g in w.gates if g.gate == "throughput" and g.passed is not None]
    assert judged and all(g.passed and abs(g.figures["train"]) < 1e-9 for g in judged)
    assert not any(n.cordoned for n in sim.fleet.nodes())  # every rollout cordon lifted
    assert sim.job("train").status.phase == "Running"
    phases = [e.phase for e in sim.events()]
    assert phases[0] == "Progressing" and phases[-1] == "Succeeded"
    # every step was written to the state before its event
    assert [r.status.phase for t, r in sim.writes if t == STATE_ROLLOUTS][-1] == "Succeeded"


async def test_a_release_failing_its_health_check_stops_after_the_first_wave_and_rolls_back(sim: FleetSim) -> None:
    sim.bad_versions = {NEW}
    rec = await start(sim)
    first = set(rec.status.waves[0].nodes)
    for _ in range(10):
        await sim.run(10)
        if sim.rollouts.rollout(rec.name).terminal:
            break
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "RolledBack" and rec.status.failed_gate is not None
    assert rec.status.failed_gate.gate == "health" and "fail" in rec.status.failed_gate.detail.lower()
    assert sim.upgraded() == first  # no node outside the first wave was ever sent it
    assert {c.node_id for c in sim.sent("rollback")} == first
    assert sim.version == dict.fromkeys(NODES, OLD)
    assert [w.step for w in rec.status.waves] == ["failed", "pending", "pending"]


async def test_a_leaking_release_fails_the_leak_gate_with_its_figures(sim: FleetSim) -> None:
    rec = await start(sim)
    (node,) = rec.status.waves[0].nodes
    for _ in range(30):
        await sim.run(5)
        wave = sim.rollouts.rollout(rec.name).status.waves[0]
        if wave.step == "baking":
            break
    leak = LeakReport(
        node_id=node, subject="gpu", gpu_index=0, slope_pct_per_h=0.42, lower_pct_per_h=0.3, upper_pct_per_h=0.5,
        window_s=1800, samples=1800, alert=True,
    )  # fmt: skip
    await sim.deliver(leak, f"/x/{node}")
    await sim.run(PLAN_BAKE + 5)
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "RolledBack", rec.status.reason
    assert rec.status.failed_gate.gate == "leak" and rec.status.failed_gate.figures[f"{node} gpu 0"] == 0.42
    assert "+0.420 %/h" in rec.status.failed_gate.detail
    assert sim.upgraded() == {node} and sim.version[node] == OLD


PLAN_BAKE = int(PLAN.bake_s)


async def test_pause_resume_abort_and_one_rollout_at_a_time(sim: FleetSim) -> None:
    rec = await start(sim)
    with pytest.raises(RolloutError, match="one rollout at a time"):
        await start(sim)
    await sim.rollouts.act(rec.name, "pause", "op")
    await sim.run(60)
    assert sim.rollouts.rollout(rec.name).status.phase == "Paused"
    assert sim.upgraded() == set()  # nothing moves while paused
    await sim.rollouts.act(rec.name, "resume", "op")
    with pytest.raises(RolloutError, match=r"cannot resume rollout .* it is Progressing"):
        await sim.rollouts.act(rec.name, "resume", "op")
    for _ in range(30):
        await sim.run(5)
        if sim.rollouts.rollout(rec.name).status.waves[0].step == "baking":
            break
    first = set(rec.status.waves[0].nodes)
    assert sim.upgraded() == first
    rec = await sim.rollouts.act(rec.name, "abort", "op")
    await sim.run(10)
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "Aborted" and sim.version == dict.fromkeys(NODES, OLD)
    assert not any(n.cordoned for n in sim.fleet.nodes())
    with pytest.raises(RolloutError, match="cannot pause"):
        await sim.rollouts.act(rec.name, "pause", "op")


async def test_undo_after_success_and_a_new_leader_resumes_from_the_state(sim: FleetSim, tmp_path) -> None:
    rec = await start(sim, Plan(waves=[50, 100], bake_s=10, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=30))
    for _ in range(10):
        await sim.run(10)
        if sim.rollouts.rollout(rec.name).terminal:
            break
    assert sim.rollouts.rollout(rec.name).status.phase == "Succeeded"
    await sim.rollouts.act(rec.name, "undo", "op")
    await sim.run(10)
    assert sim.rollouts.rollout(rec.name).status.phase == "RolledBack" and sim.version == dict.fromkeys(NODES, OLD)
    # a standby follows the state: it knows the rollout as recorded
    from tests.support.coordinator.offline import offline_coordinator

    (tmp_path / "b").mkdir()
    other = offline_coordinator(tmp_path / "b")
    for topic, record in sim.writes:
        if topic == STATE_ROLLOUTS:
            other.apply_state(STATE_ROLLOUTS, record.name, record, "rollout")
    assert other.get(Rollouts).rollout(rec.name).status.phase == "RolledBack"


async def test_a_published_release_starts_a_rollout_and_one_without_a_sha256_does_not(sim: FleetSim) -> None:
    from myolo.events.payloads import ReleasePublished

    await sim.deliver(ReleasePublished(component="myolo-agent", version="4.2.0", artifact="/srv/r.whl"), "/ci")
    assert sim.rollouts.rollouts() == ()  # nothing unverifiable is installed
    await sim.deliver(ReleasePublished(component="web-ui", version="9", artifact="/srv/x", sha256=SHA), "/ci")
    assert sim.rollouts.rollouts() == ()  # not something agents install
    await sim.deliver(
        ReleasePublished(component="myolo-agent", version="4.2.0", artifact="/srv/r.whl", sha256=SHA), "/ci"
    )
    (rec,) = sim.rollouts.rollouts()
    assert (rec.name, rec.spec.component, rec.spec.version, rec.spec.source, rec.spec.by) == (
        "agent-4.2.0",
        "agent",
        "4.2.0",
        "release",
        "auto:release",
    )
    assert rec.spec.plan == sim.rollouts.cfg.plan and [len(w.nodes) for w in rec.status.waves] == [1, 1, 1, 2]


async def upgrade_sent(sim: FleetSim, rec: RolloutRecord) -> tuple[str, Command]:
    """Drain the first wave's one node until its upgrade is sent; the node and the command."""
    (node,) = rec.status.waves[0].nodes
    for _ in range(30):
        await sim.second()
        await sim.ack_all("drain")
        if sim.unanswered("upgrade"):
            break
    (cmd,) = sim.unanswered("upgrade")
    return node, cmd


async def test_an_upgrade_the_agent_fails_fails_the_upgrade_gate_at_once(sim: FleetSim) -> None:
    from myolo.events.payloads import CommandAck

    rec = await start(sim, Plan(waves=[20, 100], bake_s=60, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=600))
    node, cmd = await upgrade_sent(sim, rec)
    reason = "sha256 mismatch: expected abab..., got 0000..."
    ack = CommandAck(command_id=cmd.command_id, node_id=node, epoch=cmd.epoch, status="failed", reason=reason)
    await sim.deliver(ack, f"/x/{node}")
    await sim.run(5)  # far less than upgrade_timeout_s: the failure is known, nothing to wait for
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "RolledBack" and rec.status.failed_gate.gate == "upgrade"
    assert node in rec.status.failed_gate.detail and "sha256 mismatch" in rec.status.failed_gate.detail
    assert sim.upgraded() == {node} and sim.sent("rollback") == []  # it never switched: nothing to undo


async def test_a_refused_state_write_leaves_the_rollout_as_it_was(sim: FleetSim) -> None:
    from tests.support.coordinator.failing import WriteRefused, refused_writes

    rec = await start(sim)
    before = sim.rollouts.rollout(rec.name)
    with refused_writes(sim.coord.store, STATE_ROLLOUTS) as refused:
        with pytest.raises(WriteRefused):
            await sim.rollouts.tick(sim.clock.now())  # the first wave's step: plan, then cordon its nodes
        with pytest.raises(WriteRefused):
            await sim.rollouts.act(rec.name, "pause", "op")
    assert refused == [rec.name, rec.name]
    assert sim.rollouts.rollout(rec.name) is before  # memory is what the state topic holds
    assert before.status.phase == "Progressing" and [w.step for w in before.status.waves] == ["pending"] * 3
    assert not any(n.cordoned for n in sim.fleet.nodes())  # nothing acted on a step that was not recorded
    await sim.rollouts.tick(sim.clock.now())  # the broker is back: the same step goes through
    assert sim.rollouts.rollout(rec.name).status.waves[0].step == "draining"


async def test_an_upgrade_whose_done_ack_was_lost_passes_its_gate_from_the_duplicate(sim: FleetSim) -> None:
    from myolo.events.payloads import CommandAck

    rec = await start(sim, Plan(waves=[20, 100], bake_s=5, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=600))
    node, cmd = await upgrade_sent(sim, rec)
    sim.version[node] = NEW  # it installed and restarted; its first ack was lost, the retry met the done id
    result = {"component": "agent", "version": NEW, "previous": OLD}
    reason = "duplicate: this command id already ran; original status done"
    ack = CommandAck(
        command_id=cmd.command_id,
        node_id=node,
        epoch=cmd.epoch,
        status="duplicate",
        reason=reason,
        result=result,
        original="done",
    )
    await sim.deliver(ack, f"/x/{node}")
    for _ in range(60):
        await sim.run(1)
        if sim.rollouts.rollout(rec.name).status.wave > 0:
            break
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.failed_gate is None and rec.status.phase != "RolledBack" and sim.sent("rollback") == []
    assert rec.status.waves[0].step == "passed" and rec.status.wave == 1


async def test_a_node_that_took_the_release_back_by_itself_fails_the_wave_at_once(sim: FleetSim) -> None:
    """The release never committed on the node (its launcher restored the old one): no waiting out
    ``upgrade_timeout_s``; the record names the node and the cause."""
    rec = await start(sim, Plan(waves=[20, 100], bake_s=60, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=600))
    node, _ = await upgrade_sent(sim, rec)
    error = "exited with code 1\nTraceback ...\nRuntimeError: broken at import"
    sim.take_back(node, "agent", 3, error)
    await sim.run(5)
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "RolledBack" and rec.status.failed_gate.gate == "upgrade"
    detail = rec.status.failed_gate.detail
    assert node in detail and f"switched agent {NEW} back to {OLD} by itself" in detail and "3 start(s)" in detail
    assert "RuntimeError: broken at import" in detail
    assert sim.upgraded() == {node}


async def test_an_older_failure_of_the_same_version_does_not_fail_a_new_rollout(sim: FleetSim) -> None:
    rec = await start(sim, Plan(waves=[20, 100], bake_s=5, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=600))
    (node,) = rec.status.waves[0].nodes
    long_ago = sim.clock.now() - 3600
    sim.failed[node] = [FailedRelease(component="agent", version=NEW, restored=OLD, tries=3, at=long_ago)]
    for _ in range(60):
        await sim.run(1)
        if sim.rollouts.rollout(rec.name).status.wave > 0:
            break
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.failed_gate is None and rec.status.waves[0].step == "passed"


async def test_a_node_lost_after_its_upgrade_fails_the_wave_at_once_and_its_cause_is_learnt_after(
    sim: FleetSim,
) -> None:
    rec = await start(sim, Plan(waves=[20, 100], bake_s=60, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=600))
    node, _ = await upgrade_sent(sim, rec)
    sim.dead.add(node)  # it died restarting: no ack, no sample
    for _ in range(60):
        await sim.run(1)
        if sim.rollouts.rollout(rec.name).status.phase == "RollingBack":
            break
    # its launcher took the release back: it is heard again, saying why, and then answers the rollback
    sim.dead.discard(node)
    error = "RuntimeError: broken at import"
    sim.take_back(node, "agent", 3, error)
    for _ in range(60):
        await sim.run(1)
        if sim.rollouts.rollout(rec.name).terminal:
            break
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "RolledBack", rec.status.reason
    assert error in rec.status.taken_back[node] and error in rec.status.reason
    assert rec.status.failed_gate.gate == "upgrade"
    assert f"{node}: went Lost after its upgrade was sent" in rec.status.failed_gate.detail
    # known once the fleet calls it Lost, long before upgrade_timeout_s (600 s)
    assert rec.status.waves[0].gates[-1].gate == "upgrade"
    failed_at = next(c.time for c in rec.status.history if "gate upgrade failed" in c.reason)
    assert failed_at - rec.status.waves[0].step_since < sim.fleet.cfg.lost_after_s + 5


async def test_a_trainer_release_taken_back_at_its_first_start_fails_the_bake(sim: FleetSim) -> None:
    rec = await sim.rollouts.start("trainer", NEW, "/srv/releases/t.whl", SHA, "op", PLAN)
    (node,) = rec.status.waves[0].nodes
    for _ in range(60):
        await sim.run(1)
        if sim.rollouts.rollout(rec.name).status.waves[0].step == "baking":
            break
    assert sim.rollouts.rollout(rec.name).status.waves[0].step == "baking"
    error = "the trainer's job check failed (exit 1): ModuleNotFoundError: No module named 'kernels'"
    sim.take_back(node, "trainer", 1, error)
    await sim.run(3)
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "RolledBack" and rec.status.failed_gate.gate == "health"
    assert f"{node}: switched trainer {NEW} back to {OLD} by itself" in rec.status.failed_gate.detail
    assert "1 job check(s)" in rec.status.failed_gate.detail


def test_each_wave_shows_its_real_cumulative_share() -> None:
    from myolo.coordinator.rollouts.plan import waves

    assert waves(["a", "b", "c"], set(), [5, 20, 50, 100]) == [(33.3, ["a"]), (66.7, ["b"]), (100.0, ["c"])]
    assert [p for p, _ in waves([f"n{i:02}" for i in range(20)], set(), [5, 20, 50, 100])] == [5, 20, 50, 100]


async def test_a_node_on_the_new_version_is_not_back_until_its_release_committed(sim: FleetSim) -> None:
    """A release that runs but has not committed (no READY yet, say) may still be taken back: no bake, no next
    wave until it commits."""
    rec = await start(sim, Plan(waves=[20, 100], bake_s=5, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=600))
    node, _ = await upgrade_sent(sim, rec)
    sim.on_trial[node] = NEW
    await sim.run(30)
    wave = sim.rollouts.rollout(rec.name).status.waves[0]
    assert wave.step == "upgrading" and sim.version[node] == NEW
    assert sim.upgraded() == {node}
    del sim.on_trial[node]
    for _ in range(30):
        await sim.run(1)
        if sim.rollouts.rollout(rec.name).status.wave > 0:
            break
    assert sim.rollouts.rollout(rec.name).status.waves[0].step == "passed"


async def rollback_sent(sim: FleetSim, rec: RolloutRecord) -> str:
    """Play until the first wave's failed gate sends its node a rollback; the node."""
    for _ in range(60):
        await sim.run(1)
        if sim.sent("rollback"):
            break
    return rec.status.waves[0].nodes[0]


async def test_a_rolled_back_node_keeps_the_rollouts_cordon_until_it_runs_the_old_version_again(sim: FleetSim) -> None:
    """Its rollback acked, the node still restarts (or runs the release on trial): uncordoning it now would let
    a Lost cordon or new work land on a node in between versions."""
    sim.bad_versions = {NEW}
    rec = await start(sim, Plan(waves=[20, 100], bake_s=60, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=120))
    node = await rollback_sent(sim, rec)
    sim.dead.add(node)  # it acks nothing and says nothing while it restarts
    for c in sim.sent("rollback"):
        await sim.ack_result(c, {"component": "agent", "version": OLD, "previous": NEW})
    await sim.run(20)
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "RollingBack" and sim.fleet.node(node).cordoned
    sim.dead.discard(node)
    sim.version[node] = OLD
    for _ in range(30):
        await sim.run(1)
        if sim.rollouts.rollout(rec.name).terminal:
            break
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "RolledBack" and not sim.fleet.node(node).cordoned
    assert "left cordoned" not in rec.status.reason


async def test_a_node_that_never_comes_back_is_left_cordoned_and_named(sim: FleetSim) -> None:
    sim.bad_versions = {NEW}
    rec = await start(sim, Plan(waves=[20, 100], bake_s=60, baseline_s=5, drain_timeout_s=5, upgrade_timeout_s=60))
    node = await rollback_sent(sim, rec)
    sim.dead.add(node)
    for c in sim.sent("rollback"):
        await sim.ack_result(c, {"component": "agent", "version": OLD, "previous": NEW})
    for _ in range(120):
        await sim.run(1)
        if sim.rollouts.rollout(rec.name).terminal:
            break
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "RolledBack"
    assert f"{node} left cordoned: not Ready" in rec.status.reason and sim.fleet.node(node).cordoned


async def _new_leader(sim: FleetSim) -> int:
    """Another term begins on the same state (a standby took over): the rollout is led from its record.
    Returns the new term's epoch."""
    epoch = (sim.coord.leadership.epoch or 0) + 1
    await sim.coord.assume_term(LeaderTerm(epoch=epoch, instance_id="standby", started=sim.clock.now()))
    return epoch


async def test_a_new_leader_cordons_a_draining_wave_its_predecessor_died_before_cordoning(
    sim: FleetSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sim.jobs.apply(manifest(name="train", lo=1, hi=4), "alice")
    await sim.run(10, "train")
    busy = set(sim.job("train").status.generation.node_ids)
    with monkeypatch.context() as m:  # the leader records the wave as draining, then dies before cordoning
        m.setattr(sim.cordons, "cordon_automatically", lambda *_a, **_k: True)
        rec = await start(sim, Plan(waves=[40, 100], bake_s=10, baseline_s=5, drain_timeout_s=30, upgrade_timeout_s=30))
        await sim.run(3, "train")
    wave = sim.rollouts.rollout(rec.name).status.waves[0]
    assert wave.step == "draining" and busy & set(wave.nodes)  # a node of the wave runs the job: it must leave
    assert not any(sim.fleet.node(n).cordoned for n in wave.nodes)
    epoch = await _new_leader(sim)
    await sim.run(5, "train")
    cordoned_by_the_new_leader = {
        r.node_id for _, r in sim.writes if isinstance(r, CordonRecord) and r.cordoned and r.epoch == epoch
    }
    assert cordoned_by_the_new_leader == set(wave.nodes)
    for _ in range(20):
        await sim.run(30, "train")
        if sim.rollouts.rollout(rec.name).terminal:
            break
    rec = sim.rollouts.rollout(rec.name)
    assert rec.status.phase == "Succeeded", rec.status.reason
    assert not any("still running jobs" in h.reason for h in rec.status.history)  # drained, not timed out
    assert not any(n.cordoned for n in sim.fleet.nodes())


async def test_a_new_leader_uncordons_a_baking_wave_its_predecessor_died_before_uncordoning(
    sim: FleetSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def lost(*_a: Any, **_k: Any) -> bool:
        return False

    with monkeypatch.context() as m:  # the leader records the wave as baking, then dies before uncordoning
        m.setattr(sim.cordons, "uncordon_automatically", lost)
        rec = await start(sim)
        for _ in range(30):
            await sim.run(1)
            if sim.rollouts.rollout(rec.name).status.waves[0].step == "baking":
                break
    wave = sim.rollouts.rollout(rec.name).status.waves[0]
    assert wave.step == "baking" and all(sim.fleet.node(n).cordoned for n in wave.nodes)
    await _new_leader(sim)
    await sim.run(2)
    assert not any(sim.fleet.node(n).cordoned for n in wave.nodes)
