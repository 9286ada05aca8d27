"""The jobs component on a real (offline) coordinator: placement, generations, shrink, grow, restarts, adoption.

Simulated time; Kafka's writes are recorded; the test plays the agents. The same scenarios with real
processes and the real broker: tests/integration/coordinator/test_jobs.py."""

from __future__ import annotations

import msgspec
import pytest

from myolo.coordinator.cordons.records import STATE_NODES, CordonRecord
from myolo.coordinator.jobs.interface import JobConflict
from myolo.coordinator.jobs.manifest import ManifestError
from myolo.coordinator.jobs.records import STATE_JOBS, JobRecord
from myolo.events.payloads.commands import StartWorkersArgs
from tests.support.coordinator.jobs_sim import JobSim, manifest


@pytest.fixture
async def sim(tmp_path):
    s = JobSim(tmp_path, MYOLO_JOBS_GROW_COOLDOWN_S="30", MYOLO_FLEET_LOST_AFTER_S="10")
    await s.start()
    yield s
    await s.close()


async def running(sim: JobSim, **kw) -> JobRecord:
    await sim.jobs.apply(manifest(**kw), "alice")
    await sim.second()
    return await sim.run_generation()


def starts(sim: JobSim, generation: int) -> list[StartWorkersArgs]:
    out = [msgspec.convert(c.args, StartWorkersArgs) for c in sim.sent("start_workers")]
    return sorted((a for a in out if a.generation == generation), key=lambda a: a.node_rank)


async def test_a_job_is_placed_on_every_node_and_runs(sim: JobSim) -> None:
    rec = await running(sim)
    gen = rec.status.generation
    assert rec.status.phase == "Running" and gen.number == 1 and gen.replicas == 3
    args = starts(sim, 1)
    assert [(a.node_rank, a.nnodes, a.gpus) for a in args] == [(0, 3, [0]), (1, 3, [0]), (2, 3, [0])]
    assert {a.master_port for a in args} == {gen.master_port} and args[0].master_addr == "127.0.0.1"
    job = args[0].job
    assert (job.parallelism.dp, job.data.global_batch, job.checkpoint.resume, job.checkpoint.dir) == (
        3,
        12,
        True,
        "/srv/ckpt/tiny",
    )
    # the generation was written before its first start command went out
    first_write = next(i for i, (t, r) in enumerate(sim.writes) if t == STATE_JOBS and r.status.generation is not None)
    first_start = next(
        i for i, (k, c) in enumerate(sim.writes) if k == "send" and getattr(c, "action", "") == "start_workers"
    )
    assert first_write < first_start
    await sim.progress("tiny", 1, 1, 3)
    rec = sim.job()
    assert rec.status.generation.first_step_at is not None and rec.status.generation.resumed_from == 0
    assert rec.status.progress.step == 1 and rec.status.progress.tokens_per_s == 1000.0
    assert [d.kind for d in rec.status.decisions] == ["start"]


async def test_a_cordoned_node_shrinks_the_job_and_its_return_grows_it_after_the_cooldown(sim: JobSim) -> None:
    await running(sim)
    await sim.progress("tiny", 1, 30, 3)
    await sim.cordons.cordon("n3", "XID 79", "ops")
    await sim.second()
    rec = sim.job()
    assert rec.status.phase == "Resizing" and rec.status.generation.number == 2 and rec.status.generation.replicas == 2
    assert rec.status.decisions[-1].kind == "shrink" and "n3 was cordoned" in rec.status.decisions[-1].reason
    stops = [c for c in sim.sent("stop_workers") if c.args["generation"] == 1]
    assert sorted(c.node_id for c in stops) == ["n1", "n2", "n3"] and all(c.args["checkpoint"] for c in stops)
    assert starts(sim, 2) == []  # nothing starts before the old generation stopped
    rec = await sim.run_generation()
    assert rec.status.phase == "Running" and [a.node_rank for a in starts(sim, 2)] == [0, 1]
    assert {a.gpus[0] for a in starts(sim, 2)} == {0} and all(a.nnodes == 2 for a in starts(sim, 2))
    assert starts(sim, 2)[0].job.parallelism.dp == 2 and starts(sim, 2)[0].job.data.global_batch == 12

    await sim.cordons.uncordon("n3", "fixed", "ops")
    await sim.second(5)
    assert sim.job().status.generation.number == 2  # the growth cooldown (30 s since the shrink) holds
    await sim.second(30)
    rec = await sim.run_generation()
    assert rec.status.generation.number == 3 and rec.status.generation.replicas == 3
    assert [d.kind for d in rec.status.decisions] == ["start", "shrink", "grow"]
    assert "capacity for 3 replica(s)" in rec.status.decisions[-1].reason


async def test_a_lost_node_is_not_waited_for(sim: JobSim) -> None:
    await running(sim)
    sim.dead.add("n2")
    await sim.second(15)  # lost after 10 s, then cordoned automatically
    rec = sim.job()
    assert rec.status.generation.replicas == 2 and rec.status.generation.node_ids == ["n1", "n3"]
    assert not [c for c in sim.sent("stop_workers") if c.node_id == "n2"]  # a Lost node gets no stop to wait on
    rec = await sim.run_generation()
    assert rec.status.phase == "Running"


async def test_below_min_replicas_the_job_waits_in_pending_with_the_reason(tmp_path) -> None:
    sim = JobSim(tmp_path, nodes=("n1",))
    await sim.start()
    try:
        await sim.jobs.apply(manifest(lo=2, hi=3), "alice")
        await sim.second(2)
        rec = sim.job()
        assert rec.status.phase == "Pending" and rec.status.generation is None
        assert "minReplicas 2" in rec.status.reason and "1 free GPU(s) on 1 schedulable node(s)" in rec.status.reason
        assert sim.sent("start_workers") == []
        sim.nodes.append("n2")
        await sim.second()
        rec = await sim.run_generation()
        assert rec.status.phase == "Running" and rec.status.generation.replicas == 2
    finally:
        await sim.close()


async def test_a_worker_failure_restarts_the_same_layout_after_a_back_off(sim: JobSim) -> None:
    await running(sim)
    await sim.fault("tiny", 1, "n2")
    assert sim.job().status.generation.number == 1  # the others have not shown a sign of life since the fault yet
    await sim.second()
    rec = sim.job()
    assert rec.status.restarts == 1 and rec.status.node_failures == {"n2": 1}
    assert rec.status.generation.number == 2 and rec.status.generation.node_ids == ["n1", "n2", "n3"]
    assert "restart 1/10 after 1 s" in rec.status.decisions[-1].reason
    assert all(not c.args["checkpoint"] for c in sim.sent("stop_workers"))
    rec = await sim.run_generation()
    assert rec.status.phase == "Running" and rec.status.generation.number == 2


async def test_a_node_failing_the_job_again_and_again_is_cordoned(sim: JobSim) -> None:
    await running(sim)
    for gen in (1, 2, 3):
        await sim.fault("tiny", gen, "n3")
        await sim.second(10)
        await sim.run_generation()
    await sim.second(2)
    cordons = [r for t, r in sim.writes if t == STATE_NODES and isinstance(r, CordonRecord) and r.node_id == "n3"]
    assert cordons and cordons[-1].by == "auto:job" and "job tiny: 3 failures" in cordons[-1].reason
    rec = await sim.run_generation()
    assert "n3" not in rec.status.generation.node_ids and rec.status.generation.replicas == 2


async def test_the_restart_budget_ends_in_failed(sim: JobSim) -> None:
    await running(sim, restarts=1)
    await sim.fault("tiny", 1, "n1")
    await sim.second(5)
    await sim.run_generation()
    await sim.fault("tiny", 2, "n2")
    await sim.second()
    rec = sim.job()
    assert rec.status.phase == "Failed" and "restart budget spent (1 restart(s))" in rec.status.reason
    await sim.second(3)
    assert sim.job().status.phase == "Failed"


async def test_every_node_completing_the_steps_succeeds(sim: JobSim) -> None:
    await running(sim)
    for node in ("n1", "n2", "n3"):
        await sim.completed("tiny", 1, node, 400)
    rec = sim.job()
    assert rec.status.phase == "Succeeded" and rec.status.decisions[-1].kind == "succeed"


async def test_scale_and_delete(sim: JobSim) -> None:
    await running(sim)
    with pytest.raises(ValueError, match=r"replicas: 5 is not allowed .* one of \[1, 2, 3\]"):
        await sim.jobs.scale("tiny", 5, "bob")
    await sim.jobs.scale("tiny", 2, "operator:bob")
    await sim.second()
    rec = await sim.run_generation()
    assert rec.status.generation.replicas == 2 and rec.status.decisions[-1].kind == "scale"
    await sim.jobs.delete("tiny", "operator:bob")
    await sim.second()
    assert [c.args["checkpoint"] for c in sim.sent("stop_workers") if c.args["generation"] == 2] == [True, True]
    await sim.ack_all("stop_workers")
    await sim.second()
    assert sim.jobs.job("tiny") is None and sim.written()[-1] is None


async def test_a_deleted_job_leaves_nothing_of_what_was_heard_about_it(sim: JobSim) -> None:
    sim.workers = {n: [("tiny", 1)] for n in ("n1", "n2")}  # n3's samples show no worker of the job
    rec = await running(sim)
    await sim.progress("tiny", rec.status.generation.number, 1, rec.status.generation.replicas)
    await sim.second()
    runtime = sim.jobs.runtime["tiny"]
    assert "n3" in runtime.missing and runtime.rates and runtime.metrics.generation == 1
    await sim.jobs.delete("tiny", "operator:bob")
    await sim.second()
    await sim.ack_all("stop_workers")
    await sim.second()
    assert sim.jobs.job("tiny") is None and "tiny" not in sim.jobs.runtime
    await sim.jobs.apply(manifest(), "alice")  # the same name again: a job of its own, heard of afresh
    assert sim.jobs.runtime["tiny"].missing == {} and sim.jobs.runtime["tiny"].evidence.faults == []


async def test_apply_changes_bounds_but_not_the_training(sim: JobSim) -> None:
    await running(sim)
    rec, created = await sim.jobs.apply(manifest(lo=1, hi=2), "alice")
    assert not created and rec.spec.job.max_replicas == 2
    await sim.second()
    assert (await sim.run_generation()).status.generation.replicas == 2
    with pytest.raises(JobConflict) as err:
        await sim.jobs.apply(manifest().replace("steps: 400", "steps: 500"), "alice")
    assert err.value.field == "spec.trainer"
    with pytest.raises(ManifestError) as bad:
        await sim.jobs.apply(manifest(lo=3, hi=1), "alice")
    assert bad.value.field == "spec.maxReplicas"


async def test_a_new_leader_adopts_the_running_job_without_restarting_it(sim: JobSim, tmp_path) -> None:
    await running(sim)
    (tmp_path / "b").mkdir()
    standby = JobSim(tmp_path / "b")
    for topic, record in sim.writes:
        if topic == STATE_JOBS:
            standby.jobs.on_state(topic, record.name, record, "job")
    await standby.start(epoch=4)
    try:
        rec = standby.job()
        assert rec.status.phase == "Running" and rec.status.generation.number == 1
        assert (
            rec.status.decisions[-1].kind == "adopt"
            and "generation 1 (running) kept" in rec.status.decisions[-1].reason
        )
        await standby.second(5)
        assert standby.sent("start_workers") == [] and standby.sent("stop_workers") == []
    finally:
        await standby.close()


POLICIES = """\
  policies:
    - {metric: gpu_util, threshold: 75%, window: 10s, cooldown: 20s}
    - {metric: gradient_staleness, threshold: 10, window: 10s, cooldown: 20s}
"""


async def test_policies_scale_out_on_gpu_util_and_in_on_staleness_with_the_values(sim: JobSim) -> None:
    rec = await running(sim, extra=POLICIES)
    assert rec.status.generation.replicas == 1  # a job with a scaleOut policy starts at minReplicas
    sim.util = 90.0
    await sim.second(12)
    rec = sim.job()
    assert rec.status.generation.replicas == 2 and rec.status.decisions[-1].kind == "grow"
    assert rec.status.decisions[-1].metrics["gpu_util"] == pytest.approx(90.0)
    assert "gpu_util 90% over 10 s >= 75%" in rec.status.decisions[-1].reason
    sim.util = 50.0
    rec = await sim.run_generation()
    await sim.second(10)
    assert sim.job().status.generation.number == 2  # busy no more
    for t in range(25):
        await sim.progress("tiny", 2, 10 + t, 2, staleness=12)
        await sim.second()
    rec = sim.job()
    assert rec.status.generation.replicas == 1 and rec.status.decisions[-1].kind == "shrink"
    assert rec.status.decisions[-1].metrics["gradient_staleness"] == 12.0


async def test_a_straggler_is_replaced_by_a_spare_node(tmp_path) -> None:
    sim = JobSim(tmp_path, nodes=("n1", "n2", "n3", "n4"), MYOLO_JOBS_STRAGGLER_WINDOW_S="10")
    await sim.start()
    try:
        rec = await running(sim, hi=3)
        assert rec.status.generation.node_ids == ["n1", "n2", "n3"]
        await sim.second(30)  # past the cooldown since the start
        nodes = {0: "n1", 1: "n2", 2: "n3"}
        for t in range(12):
            await sim.progress("tiny", 1, t + 1, 3, step_times={0: 0.2, 1: 1.0, 2: 0.2}, nodes=nodes)
            await sim.second()
        rec = sim.job()
        assert rec.status.decisions[-1].kind == "replace" and "replica 1 on n2" in rec.status.decisions[-1].reason
        assert rec.status.generation.node_ids == ["n1", "n3", "n4"] and rec.status.decisions[-1].metrics["ratio"] == 5.0
    finally:
        await sim.close()


async def test_a_node_refusing_the_start_is_left_out_without_spending_the_budget(sim: JobSim) -> None:
    await sim.jobs.apply(manifest(), "alice")
    await sim.second(2)
    refused = next(c for c in sim.sent("start_workers") if c.node_id == "n2")
    await sim.ack(refused, "rejected", "bad arguments: action: this node is draining")
    await sim.second()
    rec = sim.job()
    assert rec.status.restarts == 0 and rec.status.node_failures == {} and "n2" in rec.status.avoid
    assert (
        rec.status.generation.node_ids == ["n1", "n3"]
        and "placed without it for 60 s" in rec.status.decisions[-1].reason
    )
    rec = await sim.run_generation()
    assert rec.status.phase == "Running" and rec.status.generation.replicas == 2
    await sim.second(61)  # the avoidance ends; past the growth cooldown the job grows back onto n2
    rec = await sim.run_generation()
    assert rec.status.generation.node_ids == ["n1", "n2", "n3"] and rec.status.decisions[-1].kind == "grow"


async def test_a_start_whose_done_ack_was_lost_counts_as_started_from_the_duplicate(sim: JobSim) -> None:
    await sim.jobs.apply(manifest(), "alice")
    await sim.second(2)
    first = sim.sent("start_workers")
    assert len(first) == 3
    for c in first:  # the retry met the id already done: the agent answers duplicate, original outcome done
        await sim.ack(c, "duplicate", "duplicate: this command id already ran; original status done", "done")
    await sim.second()
    rec = sim.job()
    assert (
        rec.status.phase == "Running" and rec.status.generation.number == 1 and rec.status.generation.stage == "running"
    )
    assert rec.status.restarts == 0 and [d.kind for d in rec.status.decisions] == ["start"]


async def test_a_duplicate_of_a_failed_start_fails_the_generation_as_the_first_run_did(sim: JobSim) -> None:
    await sim.jobs.apply(manifest(), "alice")
    await sim.second(2)
    failed = next(c for c in sim.sent("start_workers") if c.node_id == "n2")
    await sim.ack(failed, "duplicate", "duplicate: original status failed (OSError: no such file)", "failed")
    await sim.second()
    rec = sim.job()
    assert (
        rec.status.generation.number == 2 and "n2" not in rec.status.avoid
    )  # the job's failure, not the node's refusal
    assert "start_workers duplicate on n2" in rec.status.decisions[-1].reason


async def test_an_operator_uncordon_lifts_the_drain_of_an_automatic_cordon(sim: JobSim) -> None:
    await sim.cordons.uncordon("n1", "GPU reset", "ops")
    drains = [c.args for c in sim.sent("drain") if c.node_id == "n1"]
    assert drains == [{"draining": False, "reason": "GPU reset"}]


async def test_a_dead_node_is_left_out_well_before_it_is_declared_lost(sim: JobSim) -> None:
    await running(sim)
    sim.dead.add("n3")  # the machine died: its peers' workers fail at once, its samples stop
    await sim.fault("tiny", 1, "n1")
    await sim.fault("tiny", 1, "n2")
    for _ in range(6):
        await sim.ack_all("stop_workers")
        await sim.ack_all("start_workers")
        await sim.second()
    rec = sim.job()
    assert rec.status.generation.node_ids == ["n1", "n2"] and rec.status.generation.stage == "running"
    shrink = rec.status.decisions[-1]
    assert shrink.kind == "shrink" and shrink.generation == 2  # no restart onto the dead node first
    assert "n3 silent since the first worker fault" in shrink.reason or "n3 is Suspect" in shrink.reason
    assert sim.fleet.node("n3").liveness != "Lost"  # seconds before it would be declared Lost


async def test_workers_gone_from_a_nodes_samples_restart_the_generation_without_a_fault_event(sim: JobSim) -> None:
    sim.workers = {n: [("tiny", 1)] for n in ("n1", "n2", "n3")}
    await running(sim)
    await sim.second(20)
    assert sim.job().status.generation.number == 1  # the workers show in every sample: nothing to do
    sim.workers["n2"] = []  # they died, and the fault event was lost (e.g. during a leader change)
    await sim.second(10)
    assert sim.job().status.generation.number == 1  # not yet: jobs.workers_missing_s is 15 s
    await sim.second(6)
    rec = sim.job()
    assert rec.status.generation.number == 2 and rec.status.decisions[-1].kind == "restart"
    assert "n2: no worker of generation 1 in n2's samples for 15 s" in rec.status.decisions[-1].reason


async def test_the_one_member_silent_after_a_fault_is_left_out_after_the_settle_time(tmp_path) -> None:
    sim = JobSim(tmp_path, MYOLO_JOBS_FAULT_SETTLE_S="1.5")
    await sim.start()
    try:
        await running(sim)
        sim.dead.add("n2")
        await sim.fault("tiny", 1, "n1")  # n1's worker failed on n2's closed socket; n3's is blocked
        await sim.second()  # n1 and n3 sample: alive; n2 does not
        assert sim.job().status.generation.number == 1  # within the settle time
        await sim.second()
        rec = sim.job()
        assert rec.status.generation.number == 2 and rec.status.generation.node_ids == ["n1", "n3"]
        assert "n2 silent since the first worker fault (1.5 s: no sample, no fault)" in rec.status.decisions[-1].reason
        assert rec.status.restarts == 0 and sim.fleet.node("n2").liveness != "Lost"
    finally:
        await sim.close()


async def test_a_refused_state_write_leaves_the_job_as_it_was_and_sends_nothing(sim: JobSim) -> None:
    from tests.support.coordinator.failing import WriteRefused, refused_writes

    with refused_writes(sim.coord.store, STATE_JOBS), pytest.raises(WriteRefused):
        await sim.jobs.apply(manifest(), "alice")
    assert sim.jobs.job("tiny") is None and "tiny" not in sim.jobs.runtime
    await sim.jobs.apply(manifest(), "alice")
    pending = sim.job()
    with refused_writes(sim.coord.store, STATE_JOBS) as refused:
        await sim.second(3)  # the leader's steps: the first placement cannot be recorded
        with pytest.raises(WriteRefused):
            await sim.jobs.scale("tiny", 2, "operator:bob")
        with pytest.raises(WriteRefused):
            await sim.jobs.delete("tiny", "operator:bob")
    assert refused and set(refused) == {"tiny"}
    assert sim.job() is pending and pending.status.generation is None and not pending.spec.deleting
    assert sim.sent("start_workers") == []  # nothing acted on a decision that was not recorded
    rec = await sim.run_generation()  # the broker is back: the same steps go through
    assert (
        rec.status.generation is not None
        and rec.status.generation.stage == "running"
        and rec.spec.desired_replicas is None
    )
