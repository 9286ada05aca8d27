"""The quantize component on a real (offline) coordinator with the real registry and jobs components: a request
records its run, submits a one-replica quantize job, and the job's export becomes the source's child version
with its quantization and both evaluations; refusals name the field. Simulated time; Kafka's writes recorded."""

from __future__ import annotations

import asyncio

import pytest

from myolo.coordinator.core.errors import NotLeader
from myolo.coordinator.jobs.records import STATE_JOBS
from myolo.coordinator.quantize.component import Quantize
from myolo.coordinator.quantize.interface import QuantizeRefused
from myolo.coordinator.quantize.records import STATE_QUANTIZE, QuantizeRequest
from myolo.coordinator.registry.component import Registry
from myolo.coordinator.registry.interface import NewVersion, UnknownVersion
from myolo.events.payloads import TrainingCompleted
from myolo.events.payloads.models import EvalResult, ModelExport, Quantization
from tests.support.coordinator.jobs_sim import JobSim
from tests.support.coordinator.recorder import RecordingProducer

SOURCE_SHA = "a" * 64
HELD_OUT = "d" * 64
GPTQ = QuantizeRequest(bits=4, scheme="gptq", group_size=64, calib="/data/calib.bin", eval="/data/heldout.bin")


@pytest.fixture
async def sim(tmp_path):
    s = JobSim(tmp_path, nodes=("n1",), MYOLO_QUANTIZE_ARTIFACT_DIR=str(tmp_path / "quantized"))
    await s.start()
    s.quantize, s.registry = s.coord.get(Quantize), s.coord.get(Registry)
    yield s
    await s.close()


def evaluated(ppl: float) -> EvalResult:
    import math

    return EvalResult(
        dataset="/data/heldout.bin", dataset_sha256=HELD_OUT, tokens=4096, loss=math.log(ppl), perplexity=ppl
    )


async def with_champion(sim: JobSim, tmp_path) -> None:
    await sim.registry.put_model("lm", "", None, None, "operator:ada", quantize_margin=0.03)
    v1 = NewVersion(artifact=str(tmp_path / "v1.safetensors"), sha256=SOURCE_SHA, eval=evaluated(7.0))
    await sim.registry.register("lm", v1, "operator:ada")
    await sim.registry.set_alias("lm", "champion", 1, "operator:ada", "first")


async def test_a_quantization_runs_as_a_job_and_its_export_becomes_the_sources_child(sim, tmp_path) -> None:
    await with_champion(sim, tmp_path)
    run, created = await sim.quantize.quantize("lm", 1, GPTQ, "operator:olive")
    assert created and run.state == "running"
    assert [t for t, _ in sim.writes].index(STATE_QUANTIZE) < len(sim.writes)  # the run is written
    job = sim.job(run.name)
    trainer = job.spec.job.trainer
    assert (trainer.runtime.task, trainer.checkpoint.init_from, trainer.checkpoint.init_from_sha256) == (
        "quantize",
        str(tmp_path / "v1.safetensors"),
        SOURCE_SHA,
    )
    assert (trainer.quantization.bits, trainer.quantization.scheme, trainer.quantization.group_size) == (4, "gptq", 64)
    assert (trainer.quantization.calib_path, trainer.data.eval_path) == ("/data/calib.bin", "/data/heldout.bin")
    assert trainer.checkpoint.export_path == str(tmp_path / "quantized" / run.name / "model.safetensors")
    assert (job.spec.job.min_replicas, job.spec.job.max_replicas, job.spec.job.tp, job.spec.job.pp) == (1, 1, 1, 1)
    again, created = await sim.quantize.quantize("lm", 1, GPTQ, "operator:olive")
    assert not created and again.name == run.name  # asked twice: one run, one job

    rec = await sim.run_generation(run.name)
    q = Quantization(
        scheme="gptq", bits=4, group_size=64, layers=84, bits_per_weight=4.5, calib_sha256="c" * 64,
        calib_tokens=32768, source_sha256=SOURCE_SHA, source_eval=evaluated(7.0),
    )  # fmt: skip
    export = ModelExport(
        artifact=trainer.checkpoint.export_path, sha256="b" * 64, size_bytes=99, model="small", steps=0, eval=evaluated(7.1),
        init_from=trainer.checkpoint.init_from, quantization=q,
    )  # fmt: skip
    done = TrainingCompleted(
        job_id=run.name, generation=rec.status.generation.number, node_id="n1", ranks=[0], last_step=0, export=export
    )
    await sim.deliver(done, "/x/n1")
    await sim.second(3)
    assert sim.job(run.name).status.phase == "Succeeded", sim.job(run.name).status
    assert run.name in sim.quantize.heard or sim.quantize.run(run.name).state != "running"
    run = sim.quantize.run(run.name)
    assert (run.state, run.registered) == ("registered", 2)
    v2 = sim.registry.version("lm", 2)
    assert (v2.parent, v2.job, v2.sha256, v2.quantization) == (1, run.name, "b" * 64, q)
    assert v2.tags == {"quantized": "gptq-4bit-g64"}
    assert sim.registry.champion("lm").version == 2  # +1.4 % perplexity, within the model's 3 %
    assert "quantize_margin 3.00%" in v2.auto_promotion
    with pytest.raises(QuantizeRefused, match="quantized already"):
        await sim.quantize.quantize("lm", 2, GPTQ, "operator:olive")


async def test_refusals_name_what_to_change(sim, tmp_path) -> None:
    await with_champion(sim, tmp_path)
    cases = [
        (QuantizeRequest(scheme="gptq"), "calib"),
        (QuantizeRequest(scheme="rtn", calib="/d/x.bin", eval="/d/x.bin"), "eval"),
    ]
    for request, field in cases:
        with pytest.raises(QuantizeRefused) as refused:
            await sim.quantize.quantize("lm", 1, request, "operator:olive")
        assert refused.value.field == field
    with pytest.raises(UnknownVersion):
        await sim.quantize.quantize("lm", 9, GPTQ, "operator:olive")
    await sim.registry.register("lm", NewVersion(artifact="s3://bucket/v.safetensors", sha256="e" * 64), "operator:ada")
    with pytest.raises(QuantizeRefused, match="which the trainer cannot open"):
        await sim.quantize.quantize("lm", 2, GPTQ, "operator:olive")
    assert sim.quantize.runs() == ()


async def test_a_failed_job_fails_the_run_and_nothing_is_registered(sim, tmp_path) -> None:
    await with_champion(sim, tmp_path)
    run, _ = await sim.quantize.quantize(
        "lm", 1, QuantizeRequest(scheme="rtn", eval="/data/heldout.bin"), "operator:olive"
    )
    await sim.jobs.delete(run.name, "operator:olive")
    for _ in range(5):
        await sim.second()
        await sim.ack_all("stop_workers")
    assert sim.quantize.run(run.name).state == "failed" and "deleted" in sim.quantize.run(run.name).reason
    assert len(sim.registry.versions("lm")) == 1


async def test_nowhere_to_write_is_refused_naming_the_key(tmp_path) -> None:
    s = JobSim(tmp_path, nodes=("n1",))
    await s.start()
    try:
        with pytest.raises(QuantizeRefused) as refused:
            await s.coord.get(Quantize).quantize("lm", 1, GPTQ, "operator:olive")
        assert refused.value.field == "quantize.artifact_dir"
    finally:
        await s.close()


async def test_a_standby_refuses_to_quantize(tmp_path) -> None:
    standby = JobSim(tmp_path, nodes=("n1",), MYOLO_QUANTIZE_ARTIFACT_DIR=str(tmp_path))  # never leads
    with pytest.raises(NotLeader):
        await standby.coord.get(Quantize).quantize("lm", 1, GPTQ, "operator:olive")


async def test_a_tick_while_the_job_is_being_written_leaves_the_run_running(sim, tmp_path, monkeypatch) -> None:
    await with_champion(sim, tmp_path)
    gate = asyncio.Event()
    write = RecordingProducer.send_raw

    async def slow_jobs_topic(self, topic: str, value, key, headers) -> None:
        if topic == STATE_JOBS:
            await gate.wait()  # the broker has not answered yet
        await write(self, topic, value, key, headers)

    monkeypatch.setattr(RecordingProducer, "send_raw", slow_jobs_topic)
    submit = asyncio.create_task(sim.quantize.quantize("lm", 1, GPTQ, "operator:olive"))
    while not sim.quantize.runs():
        await asyncio.sleep(0)
    (run,) = sim.quantize.runs()
    assert sim.jobs.job(run.name) is None and sim.jobs.applying(run.name)
    await sim.quantize.tick(sim.clock.now())  # the run is written, its job's record not yet
    assert sim.quantize.run(run.name).state == "running"
    gate.set()
    _, created = await submit
    await sim.second()
    assert created and sim.quantize.run(run.name).state == "running" and not sim.jobs.applying(run.name)
    assert sim.job(run.name) is not None
