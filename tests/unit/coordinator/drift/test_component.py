"""The drift component on a real (offline) coordinator, with the real registry and jobs components: drift in
production samples is detected, the model's retraining job is submitted with the champion's weights, and its
export is registered as the next version with its lineage. Simulated time; Kafka's writes are recorded."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from myolo.coordinator.core.errors import Invalid
from myolo.coordinator.drift.component import Drift
from myolo.coordinator.drift.records import STATE_DRIFT, StatusRecord
from myolo.coordinator.drift.rule import DriftRule
from myolo.coordinator.registry.component import Registry
from myolo.coordinator.registry.interface import NewVersion
from myolo.coordinator.registry.records import RetrainTemplate
from myolo.events.payloads import DriftDetected, DriftSample, FeatureSummary, TrainingCompleted
from myolo.events.payloads.models import EvalResult, ModelExport, ModelRegistered
from tests.support.coordinator.jobs_sim import JobSim

FEATURES = [f"f{i}" for i in range(10)]
TEMPLATE = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
spec:
  minReplicas: 1
  maxReplicas: 1
  trainer: {model: {name: tiny}, optimizer: {steps: 5}, data: {globalBatch: 2, seqLen: 16, path: /data/fresh.bin, evalPath: /data/heldout.bin}}
  checkpointDir: /srv/ckpt/retrain
"""
RULE = DriftRule(window_s=600, every_s=60, buckets=5, consecutive=2, reference_count=1000, min_count=100)


@pytest.fixture
async def sim(tmp_path):
    s = JobSim(tmp_path, nodes=("n1",))
    await s.start()
    s.drift, s.registry = s.coord.get(Drift), s.coord.get(Registry)
    yield s
    await s.close()


def sample(rng: np.random.Generator, shift: dict[str, float], version: str | None = "1", n: int = 20) -> DriftSample:
    features = {f: FeatureSummary(values=list(rng.normal(shift.get(f, 0.0), 1.0, n))) for f in FEATURES}
    features["plan"] = FeatureSummary(categories={"basic": int(n * 0.7), "pro": n - int(n * 0.7)})
    return DriftSample(model="credit-risk", version=version, count=n, features=features)


async def minutes(sim: JobSim, rng: np.random.Generator, n: int, shift: dict[str, float] | None = None) -> None:
    """``n`` minutes of traffic: one sample of 20 rows every 30 s, the node sampling, the coordinator ticking."""
    for _ in range(2 * n):
        await sim.deliver(sample(rng, shift or {}), "/serving/credit-risk")
        for _ in range(30):
            await sim.second()
            await sim.ack_all("start_workers")  # the node's agent starts what it is asked to


async def champion_with_template(sim: JobSim, tmp_path) -> None:
    template = RetrainTemplate(manifest=TEMPLATE, artifact_dir=str(tmp_path / "models"), cooldown_s=3600)
    await sim.registry.put_model("credit-risk", "scores loans", template, None, "operator:alice")
    v1 = await sim.registry.register(
        "credit-risk", NewVersion(artifact=str(tmp_path / "v1.safetensors"), sha256="a" * 64), "operator:alice"
    )
    await sim.registry.set_alias("credit-risk", "champion", v1.version, "operator:alice", "first model")
    await sim.drift.set_rule("credit-risk", RULE, "operator:alice")


def sent(sim: JobSim, kind: type) -> list:
    return [r for k, r in sim.writes if k == "send" and isinstance(r, kind)]


async def test_drift_retrains_from_the_champion_and_registers_the_new_version_with_its_lineage(sim, tmp_path) -> None:
    rng = np.random.default_rng(7)
    await champion_with_template(sim, tmp_path)
    # the champion's first 1,000 values of each feature become its references (learned, written once)
    await minutes(sim, rng, 30)
    learned = {r.feature for t, r in sim.writes if t == STATE_DRIFT and getattr(r, "source", None) == "learned"}
    assert learned == {*FEATURES, "plan"}
    assert not sent(sim, DriftDetected)
    stable = sim.drift.statuses[("credit-risk", "1")]
    assert not stable.drifted and stable.features and stable.share < RULE.share_threshold

    # three features shift by 1.5 standard deviations: detected after two drifted evaluations in a row
    await minutes(sim, rng, 12, {"f1": 1.5, "f4": 1.5, "f7": 1.5})
    (detected,) = sent(sim, DriftDetected)
    assert detected.model == "credit-risk" and detected.version == "1" and detected.windows == 2
    assert {f.feature for f in detected.features} == {"f1", "f4", "f7"}
    assert all(f.drifted and f.by for f in detected.features)
    run = sim.drift.retrainer.runs["credit-risk"]
    assert (run.state, run.parent, run.detection_id, detected.retraining_job) == (
        "running",
        1,
        detected.detection_id,
        run.job,
    )
    # the run was recorded before the job was applied
    kinds = [(t, type(r).__name__) for t, r in sim.writes if t in (STATE_DRIFT, "myolo.state.jobs")]
    assert kinds.index((STATE_DRIFT, "RetrainRun")) < kinds.index(("myolo.state.jobs", "JobRecord"))
    job = sim.job(run.job)
    trainer = job.spec.job.trainer
    assert trainer.checkpoint.init_from == str(tmp_path / "v1.safetensors")  # from the champion's weights
    assert trainer.checkpoint.export_path == str(tmp_path / "models" / run.job / "model.safetensors")
    assert trainer.data.eval_path == "/data/heldout.bin" and job.spec.job.labels["retrain-of"] == "credit-risk"
    assert yaml.safe_load(job.spec.manifest)["metadata"]["name"] == run.job
    assert trainer.checkpoint.dir == f"/srv/ckpt/retrain/{run.job}"  # each run apart: none resumes another's end

    # the job runs and completes; rank 0's node reports the export
    rec = await sim.run_generation(run.job)
    export = ModelExport(
        artifact=trainer.checkpoint.export_path,
        sha256="b" * 64,
        size_bytes=1234,
        model="tiny",
        steps=5,
        data_sha256="c" * 64,
        eval=EvalResult(dataset="/data/heldout.bin", dataset_sha256="d" * 64, tokens=512, loss=2.5, perplexity=12.18),
    )
    done = TrainingCompleted(
        job_id=run.job, generation=rec.status.generation.number, node_id="n1", ranks=[0], last_step=5, export=export
    )
    await sim.deliver(done, "/x/n1")
    await sim.second(3)
    assert sim.job(run.job).status.phase == "Succeeded"
    run = sim.drift.retrainer.runs["credit-risk"]
    assert (run.state, run.registered) == ("registered", 2)
    v2 = sim.registry.version("credit-risk", 2)
    assert (v2.parent, v2.drift_event, v2.job, v2.sha256, v2.data_sha256) == (
        1,
        detected.detection_id,
        run.job,
        "b" * 64,
        "c" * 64,
    )
    assert v2.metrics["loss"] == 2.5 and sim.registry.alias("credit-risk", "challenger").version == 2
    assert [r.version for r in sent(sim, ModelRegistered)] == [1, 2]
    # a completion delivered again registers nothing new
    await sim.deliver(done, "/x/n1")
    await sim.second(2)
    assert len(sim.registry.versions("credit-risk")) == 2


async def test_a_second_drift_within_the_cooldown_submits_no_job(sim, tmp_path) -> None:
    rng = np.random.default_rng(3)
    await champion_with_template(sim, tmp_path)
    await minutes(sim, rng, 30)
    await minutes(sim, rng, 12, {"f1": 2.0, "f2": 2.0})
    first = sim.drift.retrainer.runs["credit-risk"]
    await sim.jobs.delete(first.job, "operator:alice")  # the run fails (its job is gone): only the cooldown holds
    for _ in range(5):
        await sim.ack_all("stop_workers")
        await sim.second()
    assert sim.jobs.job(first.job) is None
    assert sim.drift.retrainer.runs["credit-risk"].state == "failed"
    await minutes(sim, rng, 30, {"f1": 2.0, "f2": 2.0})  # the window turns over: detected again
    detections = sent(sim, DriftDetected)
    assert len(detections) >= 2 and detections[0].retraining_job == first.job
    assert all(d.retraining_job is None for d in detections[1:])  # each said why not in the log: the cooldown
    assert sim.drift.retrainer.runs["credit-risk"].job == first.job  # no new run inside retrain.cooldown_s


async def test_other_versions_are_not_watched_and_a_file_reference_restarts_the_window(sim, tmp_path) -> None:
    rng = np.random.default_rng(5)
    await champion_with_template(sim, tmp_path)
    await sim.deliver(sample(rng, {}, version="9"), "/serving/credit-risk")
    assert ("credit-risk", "9") not in sim.drift.monitors and sim.drift.stats()["unwatched"] == 1
    # a version without a version field is the champion's
    await sim.deliver(sample(rng, {}, version=None), "/serving/credit-risk")
    assert ("credit-risk", "1") in sim.drift.monitors
    from myolo.coordinator.drift.reference import numeric_reference

    ref = numeric_reference("f0", rng.normal(0, 1, 2000))
    rec = await sim.drift.set_reference("credit-risk", None, "f0", ref, "file:ref.csv", "operator:bob")
    assert (rec.version, rec.source, rec.by) == ("1", "file:ref.csv", "operator:bob")
    assert ("credit-risk", "1") not in sim.drift.monitors  # the next sample starts it again with the reference
    view = sim.drift.view("credit-risk")
    assert [(r.feature, r.source) for r in view.references] == [("f0", "file:ref.csv")]
    assert view.rule_source == "model" and isinstance(sim.drift.summary(), tuple)
    with pytest.raises(Invalid, match="model 'nope' has no champion") as refused:
        await sim.drift.set_reference("nope", None, "f0", ref, "file:ref.csv", "operator:bob")
    assert refused.value.field == "version"
    assert all(isinstance(s, StatusRecord) for s in sim.drift.summary())
