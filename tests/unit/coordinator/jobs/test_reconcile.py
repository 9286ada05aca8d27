"""The job controller alone (``coordinator/jobs/reconcile.py``), with plain fakes of the fleet, the command
path and the cordons, a store that records every record written, and a clock the test moves: each branch of
a step, and that each record is written before the command it decides goes out."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from myolo.coordinator.commands.interface import SentCommand
from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.fleet.model import NodeState
from myolo.coordinator.jobs.config import JobsConfig
from myolo.coordinator.jobs.manifest import parse_manifest
from myolo.coordinator.jobs.reconcile import Evidence, Reconciler, Resize
from myolo.coordinator.jobs.records import JobRecord, JobSpec, JobStatus, with_spec, with_status
from myolo.events.payloads import GpuReading, TrainingCompleted, TrainingFault
from myolo.events.payloads.commands import ActionArgs
from tests.support.coordinator.jobs_sim import manifest

T0 = 1_000.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def now(self) -> float:
        return self.t


class Fleet:
    def __init__(self, *ids: str) -> None:
        self.by_id = {n: node(n) for n in ids}

    def nodes(self) -> list[NodeState]:
        return list(self.by_id.values())

    def node(self, node_id: str) -> NodeState | None:
        return self.by_id.get(node_id)

    def set(self, node_id: str, **changes: Any) -> None:
        self.by_id[node_id] = replace(self.by_id[node_id], **changes)


def node(node_id: str) -> NodeState:
    return NodeState(node_id=node_id, gpus=[GpuReading(index=0, uuid=f"{node_id}-0", name="sim")], last_seen=T0)


class Commands:
    """The command path: every issue is logged (with what was written before it) and answered by the test."""

    def __init__(self, log: list[tuple[str, Any]], clock: Clock) -> None:
        self.intents: dict[str, SentCommand] = {}
        self.args: dict[str, ActionArgs] = {}
        self.log = log
        self.clock = clock

    async def issue(self, node_id: str, args: ActionArgs) -> SentCommand:
        action = args.action
        cid = f"c{len(self.intents) + 1}"
        self.intents[cid] = SentCommand(command_id=cid, node_id=node_id, action=action, args=args)
        self.log.append(("issue", (node_id, action)))
        self.args[cid] = args
        return self.intents[cid]

    def arg(self, command_id: str, name: str) -> Any:
        """One argument of a command as issued."""
        return getattr(self.args[command_id], name)

    def intent(self, command_id: str) -> SentCommand | None:
        return self.intents.get(command_id)

    def answer(self, action: str, status: str = "done", nodes: set[str] | None = None, reason: str = "") -> None:
        for cid, i in self.intents.items():
            if _is(i.action, action) and i.status == "pending" and (nodes is None or i.node_id in nodes):
                self.intents[cid] = replace(i, status=status, reason=reason or None)

    def sent(self, action: str) -> list[str]:
        return [i.node_id for i in self.intents.values() if _is(i.action, action)]


def _is(name: str, action: str) -> bool:
    return name == action or name.lower().startswith(action.replace("_", ""))


class Cordons:
    def __init__(self) -> None:
        self.cordoned: list[tuple[str, str, str]] = []

    def cordon_automatically(self, node_id: str, reason: str, by: str) -> bool:
        self.cordoned.append((node_id, reason, by))
        return True


class Harness:
    def __init__(self, *nodes: str, **cfg: Any) -> None:
        self.clock = Clock()
        self.log: list[tuple[str, Any]] = []
        self.fleet = Fleet(*nodes)
        self.commands = Commands(self.log, self.clock)
        self.cordons = Cordons()
        self.records: dict[str, JobRecord] = {}
        self.r = Reconciler(
            JobsConfig(**cfg),
            self.fleet,  # type: ignore[arg-type]
            self.commands,  # type: ignore[arg-type]
            self.cordons,  # type: ignore[arg-type]
            self.save,
            lambda: list(self.records.values()),
            self.clock,  # type: ignore[arg-type]
        )

    async def save(self, rec: JobRecord) -> JobRecord:
        self.log.append(("save", rec))
        self.records[rec.name] = rec
        return rec

    def saved(self) -> list[JobRecord]:
        return [r for k, r in self.log if k == "save"]

    def job(self, lo: int = 1, hi: int = 3, restarts: int = 10, **changes: Any) -> JobRecord:
        spec = parse_manifest(manifest(lo=lo, hi=hi, restarts=restarts))
        rec = JobRecord(name=spec.name, created=T0, spec=JobSpec(job=spec), status=JobStatus(updated=T0, **changes))
        self.records[rec.name] = rec
        return rec

    async def step(self, rec: JobRecord, evidence: Evidence | None = None, after_s: float = 0.0) -> JobRecord:
        self.clock.t += after_s
        return await self.r.step(rec, self.clock.now(), evidence or Evidence())

    async def running(self, rec: JobRecord) -> JobRecord:
        """Through stopping and starting to running, every agent answering."""
        rec = await self.step(rec)
        rec = await self.step(rec)
        self.commands.answer("start_workers")
        rec = await self.step(rec)
        assert rec.status.generation is not None and rec.status.generation.stage == "running", rec.status.reason
        return rec


def fault(node_id: str, rank: int = 0, exit_code: int | None = 1) -> TrainingFault:
    return TrainingFault(
        job_id="tiny", generation=1, node_id=node_id, kind="worker_exit", rank=rank, exit_code=exit_code
    )


# ---- pending ---------------------------------------------------------------------------------------------
async def test_a_terminal_job_is_left_alone() -> None:
    h = Harness("n1")
    rec = h.job(phase="Succeeded")
    assert await h.step(rec) is rec and h.log == []


async def test_without_capacity_the_job_waits_in_pending_and_says_why_once() -> None:
    h = Harness()
    rec = await h.step(h.job(reason="waiting for its first placement"))
    assert rec.status.phase == "Pending" and rec.status.reason.startswith(
        "waiting for capacity: minReplicas 1 x 1 GPU(s)"
    )
    assert "0 free GPU(s) on 0 schedulable node(s)" in rec.status.reason
    assert rec.status.decisions == []  # it was Pending already: a new reason, no decision
    again = await h.step(rec)
    assert again is rec and len(h.saved()) == 1  # nothing new: nothing written


async def test_a_placement_begins_generation_one_and_writes_it_before_any_command() -> None:
    h = Harness("n1", "n2", "n3")
    rec = await h.step(h.job())
    gen = rec.status.generation
    assert gen is not None and (gen.number, gen.replicas, gen.stage) == (1, 3, "stopping")
    assert gen.node_ids == ["n1", "n2", "n3"] and gen.master_addr == "127.0.0.1"
    assert (rec.status.phase, rec.status.generations, rec.status.decisions[-1].kind) == ("Resizing", 1, "start")
    assert rec.status.last_resize is None  # a first start is not a resize
    assert [k for k, _ in h.log] == ["save"]


async def test_a_back_off_holds_the_next_generation() -> None:
    h = Harness("n1")
    rec = h.job(not_before=T0 + 10, generations=1)
    assert await h.step(rec) is rec and h.log == []
    rec = await h.step(rec, after_s=10)
    assert rec.status.generation is not None and rec.status.decisions[-1].kind == "restart"
    assert rec.status.decisions[-1].reason == "capacity for 1 replica(s) is back" and rec.status.last_resize == T0 + 10


# ---- stopping and starting -------------------------------------------------------------------------------
async def test_starting_is_written_before_the_start_commands_and_done_answers_make_it_run() -> None:
    h = Harness("n1", "n2")
    rec = await h.step(h.job(hi=2))
    rec = await h.step(rec)
    assert rec.status.generation.stage == "starting" and h.commands.sent("start_workers") == ["n1", "n2"]
    assert [k for k, _ in h.log][1:] == ["save", "issue", "issue", "save"]
    first, then = h.saved()[1:]
    assert first.status.generation.stage == "starting" and all(
        m.start_command is None for m in first.status.generation.members
    )
    assert [m.start_command for m in then.status.generation.members] == ["c1", "c2"]  # the command ids, recorded
    assert all(m.start_command for m in rec.status.generation.members)
    assert (await h.step(rec)).status.generation.stage == "starting"  # no answer yet: nothing changes
    h.commands.answer("start_workers")
    rec = await h.step(rec, after_s=3)
    assert (rec.status.phase, rec.status.generation.stage, rec.status.generation.started) == (
        "Running",
        "running",
        T0 + 3,
    )
    assert rec.status.reason == "generation 1: 2 replica(s)"


async def test_a_member_lost_before_its_generation_started_places_again() -> None:
    h = Harness("n1", "n2")
    rec = await h.step(h.job(hi=2))
    h.fleet.set("n2", liveness="Lost")
    rec = await h.step(rec)
    assert rec.status.generation.number == 2 and rec.status.generation.node_ids == ["n1"]
    assert (
        rec.status.decisions[-1].kind == "shrink"
        and rec.status.decisions[-1].reason == "n2 is Lost before generation 1 started"
    )
    assert h.commands.sent("start_workers") == []


async def test_a_node_refusing_its_start_is_avoided_without_spending_the_restart_budget() -> None:
    h = Harness("n1", "n2")
    rec = await h.step(await h.step(h.job(hi=2)))
    h.commands.answer("start_workers", "rejected", {"n2"}, reason="draining")
    rec = await h.step(rec)
    assert rec.status.restarts == 0 and rec.status.avoid == {"n2": T0 + 60.0}
    assert (
        rec.status.decisions[-1].kind == "restart"
        and "start_workers rejected on n2: draining" in rec.status.decisions[-1].reason
    )
    assert (
        rec.status.generation.node_ids == ["n1"]
        and rec.status.previous is not None
        and rec.status.previous.stage == "ended"
    )
    assert h.commands.sent("stop_workers") == ["n1", "n2"]  # the first generation's workers are told to stop


async def test_a_start_that_failed_is_the_jobs_failure_restarted_after_a_back_off() -> None:
    h = Harness("n1")
    rec = await h.step(await h.step(h.job(hi=1)))
    h.commands.answer("start_workers", "failed", reason="no such file")
    rec = await h.step(rec)
    assert (rec.status.restarts, rec.status.node_failures, rec.status.not_before) == (1, {"n1": 1}, T0 + 1.0)
    assert "restart 1/10 after 1 s" in rec.status.decisions[-1].reason and rec.status.generation.node_ids == ["n1"]


async def test_starts_not_confirmed_in_time_restart_without_the_silent_nodes() -> None:
    h = Harness("n1", "n2")
    rec = await h.step(await h.step(h.job(hi=2)))
    h.commands.answer("start_workers", nodes={"n1"})
    assert (await h.step(rec, after_s=100)).status.generation.number == 1
    rec = await h.step(rec, after_s=21)
    assert rec.status.generation.number == 2 and rec.status.avoid == {"n2": h.clock.now() + 60.0}
    assert rec.status.decisions[-1].reason == "no start confirmed by n2 in 120 s" and rec.status.restarts == 0


async def test_the_previous_generation_is_waited_for_until_the_stop_timeout() -> None:
    h = Harness("n1", "n2")
    rec = await h.running(h.job(hi=2))
    h.fleet.set("n2", liveness="Lost")
    rec = await h.step(rec)  # shrink: generation 2 on n1; n1 is told to stop, the Lost n2 is not
    assert h.commands.sent("stop_workers") == ["n1"] and rec.status.previous.members[0].stop_command is not None
    waiting = await h.step(rec, after_s=10)
    assert waiting.status.generation.stage == "stopping" and waiting.status.previous is not None
    rec = await h.step(waiting, after_s=171)  # 181 s after the new generation: going on without the answer
    assert rec.status.previous is None and rec.status.generation.stage == "starting"


async def test_a_stopped_previous_generation_lets_the_next_one_start() -> None:
    h = Harness("n1", "n2")
    rec = await h.running(h.job(hi=2))
    h.fleet.set("n2", liveness="Lost")
    rec = await h.step(rec)
    h.commands.answer("stop_workers")
    rec = await h.step(rec)
    assert (
        rec.status.previous is None
        and rec.status.generation.stage == "starting"
        and h.commands.sent("start_workers")[-1] == "n1"
    )


# ---- running ---------------------------------------------------------------------------------------------
async def test_a_lost_member_shrinks_without_a_checkpoint_and_a_cordoned_one_with_it() -> None:
    h = Harness("n1", "n2", "n3")
    rec = await h.running(h.job())
    cordon = CordonRecord(node_id="n3", cordoned=True, reason="disk", by="operator:alice", time=T0)
    h.fleet.set("n3", cordon=cordon)
    rec = await h.step(rec)
    assert (
        rec.status.decisions[-1].reason == "n3 was cordoned (operator:alice: disk)"
        and rec.status.generation.replicas == 2
    )
    stops = [m.stop_command for m in rec.status.previous.members]
    assert [h.commands.arg(c, "checkpoint") for c in stops if c] == [True] * 3  # all Ready: checkpoint first
    h.commands.answer("stop_workers")
    rec = await h.running(rec)
    h.fleet.set("n2", liveness="Lost")
    rec = await h.step(rec)
    assert rec.status.decisions[-1].kind == "shrink" and rec.status.generation.node_ids == ["n1"]
    stops = [m.stop_command for m in rec.status.previous.members]
    assert [h.commands.arg(c, "checkpoint") for c in stops if c] == [False]  # n2 is gone: nothing to wait for


async def test_a_suspect_member_alone_is_kept_but_not_with_a_fault() -> None:
    h = Harness("n1", "n2")
    rec = await h.running(h.job(hi=2))
    h.fleet.set("n2", liveness="Suspect")
    assert await h.step(rec) is rec
    rec = await h.step(rec, Evidence(faults=[fault("n1")], first_fault_at=T0))
    assert rec.status.decisions[-1].kind == "shrink" and rec.status.decisions[-1].reason == "n2 is Suspect"


async def test_a_fault_waits_for_silent_members_then_leaves_them_out() -> None:
    h = Harness("n1", "n2", "n3")
    rec = await h.running(h.job())
    h.fleet.set("n3", last_seen=T0 - 5)  # no sample since the fault
    evidence = Evidence(faults=[fault("n1"), fault("n2", rank=1)], first_fault_at=T0)
    assert await h.step(rec, evidence) is rec  # fault_settle_s not passed: n3 may still speak up
    rec = await h.step(rec, evidence, after_s=2)
    assert rec.status.decisions[-1].kind == "shrink" and rec.status.generation.node_ids == ["n1", "n2"]
    assert rec.status.decisions[-1].reason.startswith("n3 silent since the first worker fault (2.0 s")


async def test_a_fault_every_member_spoke_of_restarts_with_the_first_fault_as_the_cause() -> None:
    h = Harness("n1", "n2")
    rec = await h.running(h.job(hi=2))
    evidence = Evidence(faults=[fault("n2", rank=1, exit_code=9), fault("n1")], first_fault_at=T0)
    rec = await h.step(rec, evidence)
    assert rec.status.restarts == 1 and rec.status.node_failures == {"n2": 1}
    assert rec.status.decisions[-1].reason.startswith("rank 1 on n2: worker_exit (exit code 9); restart 1/10")
    assert rec.status.generation.node_ids == ["n1", "n2"]  # the same layout: its snapshots are where they were


async def test_a_node_failing_the_job_again_and_again_is_cordoned_and_left_out() -> None:
    h = Harness("n1", "n2", cordon_after_failures=2)
    rec = await h.running(h.job(hi=2, node_failures={"n2": 1}))
    rec = await h.step(rec, Evidence(faults=[fault("n2")], first_fault_at=T0))
    assert h.cordons.cordoned == [
        ("n2", f"job tiny: 2 failures on this node (last: {rec.status.decisions[-1].reason.split(';')[0]})", "auto:job")
    ]
    assert rec.status.generation.node_ids == ["n1"]


async def test_the_back_off_doubles_per_failure_in_a_row() -> None:
    h = Harness("n1", restart_backoff_s=1.0, max_backoff_s=60.0, cordon_after_failures=0)
    rec = await h.running(h.job(hi=1, restarts=100, streak=6, node_failures={"n1": 6}))
    rec = await h.step(rec, Evidence(faults=[fault("n1")], first_fault_at=T0))
    assert rec.status.decisions[-1].reason.endswith("restart 1/100 after 60 s")  # 2 ** 6, capped
    assert (rec.status.streak, rec.status.node_failures) == (7, {"n1": 7})


async def test_a_generation_that_trained_long_enough_ends_the_rows_of_failures() -> None:
    h = Harness("n1", "n2", healthy_after_s=120.0, cordon_after_failures=2)
    rec = await h.running(h.job(hi=2, restarts=100, streak=6, node_failures={"n1": 1, "n2": 1, "gone": 1}))
    gen = rec.status.generation
    rec = await h.save(with_status(rec, generation=replace(gen, first_step_at=h.clock.now())))
    assert await h.step(rec, after_s=119) is rec  # not long enough yet: nothing written
    rec = await h.step(rec, after_s=1)
    assert h.saved()[-1] is rec and (rec.status.streak, rec.status.node_failures) == (0, {"gone": 1})
    assert rec.status.restarts == 0  # the budget spent stays spent
    evidence = Evidence(faults=[fault("n2", rank=1), fault("n1")], first_fault_at=h.clock.now())
    rec = await h.step(rec, evidence)
    assert rec.status.decisions[-1].reason.endswith("restart 1/100 after 1 s")  # the back-off from zero
    assert h.cordons.cordoned == [] and rec.status.node_failures == {"gone": 1, "n2": 1}


async def test_the_restart_budget_spent_fails_the_job() -> None:
    h = Harness("n1")
    rec = await h.running(h.job(hi=1, restarts=0))
    rec = await h.step(rec, Evidence(faults=[fault("n1")], first_fault_at=T0))
    assert (rec.status.phase, rec.status.generation) == ("Failed", None) and rec.status.decisions[-1].kind == "fail"
    assert rec.status.reason.endswith("restart budget spent (0 restart(s))") and rec.terminal
    assert h.saved()[-2].status.phase == "Pending" and h.saved()[-1].status.phase == "Failed"


async def test_every_member_completing_the_steps_succeeds_and_short_of_them_restarts() -> None:
    h = Harness("n1", "n2")
    rec = await h.running(h.job(hi=2))

    def done(n: str, last: int) -> TrainingCompleted:
        return TrainingCompleted(job_id="tiny", generation=1, node_id=n, ranks=[0], last_step=last)

    half = await h.step(rec, Evidence(completed={"n1": done("n1", 400)}))
    assert half is rec  # one of two: not yet
    short = await h.step(rec, Evidence(completed={n: done(n, 300) for n in ("n1", "n2")}))
    assert short.status.restarts == 1 and "the workers stopped at step 300 of 400" in short.status.decisions[-1].reason
    rec = await h.step(rec, Evidence(completed={n: done(n, 400) for n in ("n1", "n2")}))
    assert (rec.status.phase, rec.status.reason, rec.status.generation.stage) == (
        "Succeeded",
        "trained 400 steps",
        "ended",
    )
    assert rec.status.decisions[-1].kind == "succeed"


# ---- resizing --------------------------------------------------------------------------------------------
async def test_a_lower_target_scales_in_and_spare_capacity_grows_after_the_cooldown() -> None:
    h = Harness("n1", "n2", "n3")
    rec = await h.running(h.job())
    rec = await h.step(with_spec(rec, desired_replicas=2))
    assert rec.status.decisions[-1].kind == "scale" and rec.status.generation.replicas == 2
    h.commands.answer("stop_workers")
    rec = await h.running(with_spec(rec, desired_replicas=None))
    assert await h.step(rec, after_s=10) is rec  # 30 s of cooldown after the scale
    rec = await h.step(rec, after_s=21)
    assert rec.status.decisions[-1].kind == "grow" and rec.status.generation.replicas == 3
    assert rec.status.decisions[-1].reason == "capacity for 3 replica(s) (was 2, target 3)"


async def test_a_policy_verdict_sets_the_size_and_a_replace_leaves_the_straggler_out() -> None:
    h = Harness("n1", "n2", "n3")
    rec = await h.running(h.job())
    gen = rec.status.generation
    shrink = Resize("shrink", 2, "staleness 12 > 8", {"gradient_staleness": 12.0})
    rec = await h.r.resize(rec, gen, h.clock.now(), shrink)
    assert rec.spec.desired_replicas == 2 and rec.status.decisions[-1].metrics == {"gradient_staleness": 12.0}
    h.commands.answer("stop_workers")
    rec = await h.running(rec)
    slow = Resize("replace", 2, "n1 slow", {"ratio": 5.0}, frozenset({"n1"}))
    rec = await h.r.resize(rec, rec.status.generation, h.clock.now(), slow)
    assert rec.status.decisions[-1].kind == "replace" and rec.status.generation.node_ids == ["n2", "n3"]
    same = Resize("grow", 2, "no change", {})
    assert await h.r.resize(rec, rec.status.generation, h.clock.now(), same) is rec  # nothing to place differently


# ---- deleting --------------------------------------------------------------------------------------------
async def test_a_deleted_job_stops_with_a_checkpoint_and_is_gone_once_stopped() -> None:
    h = Harness("n1")
    rec = await h.running(h.job(hi=1))
    rec = await h.step(with_spec(rec, deleting=True))
    assert (rec.status.generation, rec.status.decisions[-1].kind) == (None, "delete") and h.commands.sent(
        "stop_workers"
    ) == ["n1"]
    assert h.commands.arg(rec.status.previous.members[0].stop_command, "checkpoint") is True
    assert not Reconciler.gone(rec)
    h.commands.answer("stop_workers")
    rec = await h.step(rec)
    assert Reconciler.gone(rec)


@pytest.mark.parametrize("status", ["rejected", "expired"])
async def test_refusals_that_are_the_nodes_state_do_not_fail_the_job(status: str) -> None:
    h = Harness("n1", "n2")
    rec = await h.step(await h.step(h.job(hi=2)))
    h.commands.answer("start_workers", status, {"n1"})
    rec = await h.step(rec)
    assert rec.status.restarts == 0 and "n1" in rec.status.avoid and rec.status.generation.node_ids == ["n2"]
