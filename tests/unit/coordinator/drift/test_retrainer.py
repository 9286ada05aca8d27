"""The retraining controller alone, with plain fakes of the registry, the jobs and the state store: a run is
written before its job is submitted, followed to its registration, and a refused write leaves every run as
it was (nothing submitted, nothing swapped in)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import msgspec
import pytest
import yaml

from myolo.coordinator.drift.config import DriftConfig
from myolo.coordinator.drift.records import STATE_DRIFT, RetrainRun
from myolo.coordinator.drift.retrainer import Retrainer
from myolo.coordinator.jobs.interface import JobOutcome
from myolo.coordinator.registry.interface import NewVersion, TemplateInfo, VersionInfo
from myolo.events.payloads import TrainingCompleted
from myolo.events.payloads.models import ModelExport
from tests.unit.coordinator.drift.test_component import TEMPLATE

EXPORT = ModelExport(artifact="/m/v2.safetensors", sha256="b" * 64, size_bytes=10, model="tiny", steps=5)


class Refused(Exception):
    pass


class Store:
    def __init__(self) -> None:
        self.written: list[tuple[str, str, msgspec.Struct]] = []
        self.refuse = False

    async def put(self, topic: str, key: str, record: msgspec.Struct) -> None:
        if self.refuse:
            raise Refused(key)
        self.written.append((topic, key, record))


class Registry:
    def __init__(self) -> None:
        self.registered: list[tuple[str, NewVersion]] = []
        self.template = TemplateInfo(manifest=TEMPLATE, artifact_dir="/m", from_champion=True, cooldown_s=3600)
        self.champ = VersionInfo(
            model="m", version=1, artifact="/m/v1", sha256="a" * 64, parent=None, quantization=None
        )

    def retrain_template(self, name: str) -> TemplateInfo | None:
        return self.template if name == "m" else None

    def champion_info(self, name: str) -> VersionInfo | None:
        return self.champ

    async def add_version(self, model: str, new: NewVersion, by: str) -> VersionInfo:
        self.registered.append((model, new))
        return msgspec.structs.replace(self.champ, version=2, artifact=new.artifact, sha256=new.sha256)


@dataclass
class JobStatus:
    phase: str = "Running"
    reason: str = ""
    updated: float = 0.0


@dataclass
class Job:
    status: JobStatus = field(default_factory=JobStatus)


@dataclass
class Jobs:
    applied: list[tuple[str, str]] = field(default_factory=list)
    records: dict[str, Job] = field(default_factory=dict)
    gate: asyncio.Event | None = None  # when given, an apply waits for it, as a write to Kafka does
    under_way: set[str] = field(default_factory=set)

    async def submit(self, manifest: str, by: str) -> bool:
        name = yaml.safe_load(manifest)["metadata"]["name"]
        self.applied.append((name, by))
        self.under_way.add(name)
        if self.gate is not None:
            await self.gate.wait()
        self.under_way.discard(name)
        created = name not in self.records
        self.records[name] = Job()
        return created

    def job(self, name: str) -> Job | None:
        return self.records.get(name)

    def outcome(self, name: str) -> JobOutcome | None:
        job = self.records.get(name)
        if job is None:
            return None
        return JobOutcome(job=name, phase=job.status.phase, reason=job.status.reason, updated=job.status.updated)

    def applying(self, name: str) -> bool:
        return name in self.under_way


@pytest.fixture
def parts() -> tuple[Retrainer, Store, Registry, Jobs]:
    store, registry, jobs = Store(), Registry(), Jobs()
    return Retrainer(DriftConfig(), store, registry, jobs), store, registry, jobs  # type: ignore[arg-type]


async def test_a_detection_writes_the_run_then_submits_and_the_success_is_registered(parts) -> None:
    retrainer, store, registry, jobs = parts
    job = await retrainer.detected("m", "1", "drift-1", now=100.0)
    assert job is not None and jobs.applied == [(job, "drift:drift-1")]
    ((topic, key, run),) = store.written
    assert topic == STATE_DRIFT
    assert (key, run.state, run.parent, run.job) == ("retrain/m", "running", 1, job)
    assert await retrainer.detected("m", "1", "drift-2", now=101.0) is None  # one run at a time
    done = TrainingCompleted(job_id=job, generation=3, node_id="n1", ranks=[0], last_step=5, export=EXPORT)
    await retrainer.completed(done, leading=True)
    assert retrainer.runs["m"].export == EXPORT and retrainer.runs["m"].generation == 3
    jobs.records[job].status.phase = "Succeeded"
    await retrainer.tick(200.0)
    run = retrainer.runs["m"]
    assert (run.state, run.registered) == ("registered", 2)
    ((model, new),) = registry.registered
    assert (model, new.parent, new.drift_event, new.job, new.generation) == ("m", 1, "drift-1", job, 3)


async def test_a_refused_write_of_a_run_submits_nothing_and_changes_nothing(parts) -> None:
    retrainer, store, _, jobs = parts
    store.refuse = True
    with pytest.raises(Refused):
        await retrainer.detected("m", "1", "drift-1", now=100.0)
    assert retrainer.runs == {} and jobs.applied == []
    store.refuse = False
    job = await retrainer.detected("m", "1", "drift-1", now=100.0)
    before = retrainer.runs["m"]
    jobs.records[job].status.phase = "Failed"
    store.refuse = True
    with pytest.raises(Refused):
        await retrainer.tick(200.0)
    assert retrainer.runs["m"] is before and before.state == "running"  # memory is what the topic holds


async def test_a_follower_keeps_the_export_without_writing_and_a_deleted_job_fails_the_run(parts) -> None:
    retrainer, store, _, jobs = parts
    job = await retrainer.detected("m", "1", "drift-1", now=100.0)
    done = TrainingCompleted(job_id=job, generation=1, node_id="n1", ranks=[0], last_step=5, export=EXPORT)
    await retrainer.completed(done, leading=False)
    assert retrainer.exports[job] == (1, EXPORT) and retrainer.runs["m"].export is None and len(store.written) == 1
    del jobs.records[job]
    await retrainer.tick(150.0)
    assert (retrainer.runs["m"].state, retrainer.runs["m"].reason) == ("failed", "the job was deleted")
    replayed = Retrainer(DriftConfig(), Store(), Registry(), Jobs())  # type: ignore[arg-type]
    replayed.apply_state(store.written[-1][2])  # type: ignore[arg-type]
    assert isinstance(replayed.runs["m"], RetrainRun) and replayed.runs["m"] == retrainer.runs["m"]


async def test_a_tick_while_the_job_is_being_written_leaves_the_run_running(parts) -> None:
    retrainer, _, _, jobs = parts
    jobs.gate = asyncio.Event()
    submit = asyncio.create_task(retrainer.detected("m", "1", "drift-1", now=100.0))
    while not jobs.applied:
        await asyncio.sleep(0)
    await retrainer.tick(100.5)  # the run is written, its job's record not yet
    assert retrainer.runs["m"].state == "running"
    jobs.gate.set()
    job = await submit
    await retrainer.tick(101.0)
    assert retrainer.runs["m"].state == "running" and jobs.job(job) is not None
