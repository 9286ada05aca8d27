"""Job records and retraining templates stored with a flat trainer job read as their sectioned equivalents."""

from __future__ import annotations

import msgspec
import structlog

from myolo.coordinator.jobs.manifest import camel, parse_manifest
from myolo.coordinator.jobs.records import JobRecord, JobSpec, JobStatus
from myolo.coordinator.registry.records import ModelRecord, RetrainTemplate
from myolo.coordinator.state import StateCodec
from myolo.coordinator.state.codec import KIND_HEADER
from myolo.events.payloads.trainer_flat import flat_fields, sectioned

CODEC = StateCodec({"job": JobRecord, "model": ModelRecord})

HEAD = """apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {name: lm}
spec:
  minReplicas: 1
  maxReplicas: 2
  checkpointDir: /ckpt/lm
  trainer:
"""
SECTIONED = (
    HEAD
    + """    model: {name: small, args: {n_layers: 4}}
    data: {path: /data/t.bin, evalPath: /data/e.bin, globalBatch: 16, seqLen: 32}
    optimizer: {lr: 0.001, steps: 50, warmupSteps: 5}
    checkpoint: {exportPath: /out/lm.safetensors}
    defense: {kind: gradient_compression, param: 0.05}
    watermark: {keyFile: /keys/wm}
    quantization: {bits: 8, calibPath: /data/c.bin}
"""
)
FLAT = (
    HEAD
    + """    model: small
    modelArgs: {n_layers: 4}
    dataPath: /data/t.bin
    evalDataPath: /data/e.bin
    globalBatch: 16
    seqLen: 32
    lr: 0.001
    steps: 50
    warmupSteps: 5
    exportPath: /out/lm.safetensors
    defense: gradient_compression
    defenseParam: 0.05
    watermark: /keys/wm
    quantBits: 8
    calibPath: /data/c.bin
"""
)
# the trainer job as a job record stored it before the sections (snake_case, one table)
FLAT_JOB = {
    "model": "small",
    "model_args": {"n_layers": 4},
    "data_path": "/data/t.bin",
    "eval_data_path": "/data/e.bin",
    "global_batch": 16,
    "seq_len": 32,
    "lr": 0.001,
    "steps": 50,
    "warmup_steps": 5,
    "checkpoint_dir": "/ckpt/lm",
    "export_path": "/out/lm.safetensors",
    "defense": "gradient_compression",
    "defense_param": 0.05,
    "watermark": "/keys/wm",
    "quant_bits": 8,
    "calib_path": "/data/c.bin",
}


def _decode(kind: str, raw: bytes) -> msgspec.Struct:
    return CODEC.decode(raw, [(KIND_HEADER, kind.encode())])


def _record(manifest: str) -> JobRecord:
    spec = JobSpec(job=parse_manifest(manifest), manifest=manifest)
    return JobRecord(name="lm", created=1.0, spec=spec, status=JobStatus(updated=2.0))


def test_a_stored_flat_job_record_reads_as_its_sectioned_equivalent() -> None:
    expected = _record(SECTIONED)
    stored = msgspec.to_builtins(_record(SECTIONED))
    stored["spec"]["job"]["trainer"] = FLAT_JOB
    stored["spec"]["manifest"] = FLAT
    with structlog.testing.capture_logs() as logs:
        got = _decode("job", msgspec.json.encode(stored))
    assert isinstance(got, JobRecord)
    assert got.spec.job.trainer == expected.spec.job.trainer
    assert parse_manifest(got.spec.manifest) == expected.spec.job  # the stored manifest applies again
    assert got.spec.job.trainer.data.path == "/data/t.bin" and got.spec.job.trainer.quantization.bits == 8
    (event,) = [e for e in logs if e.get("record") == "job/lm"]
    assert "spec.job.trainer.lr" in event["moved"] and "manifest spec.trainer.quantBits" in event["moved"]


def test_a_job_record_flat_in_both_ways_reads_too() -> None:
    """Written before spec and status were apart, with the trainer flat: both readings apply."""
    nested = msgspec.to_builtins(_record(SECTIONED))
    flat = {"name": "lm", "created": 1.0, **nested["status"], "manifest": FLAT}
    flat["spec"] = {**nested["spec"]["job"], "trainer": FLAT_JOB}
    got = _decode("job", msgspec.json.encode(flat))
    assert isinstance(got, JobRecord) and got.spec.job.trainer == _record(SECTIONED).spec.job.trainer


def test_a_stored_flat_retrain_template_reads_as_its_sectioned_equivalent() -> None:
    def model(manifest: str) -> ModelRecord:
        template = RetrainTemplate(manifest=manifest, artifact_dir="/models/lm")
        return ModelRecord(name="lm", created=1.0, updated=1.0, by="op", retrain=template)

    with structlog.testing.capture_logs() as logs:
        got = _decode("model", msgspec.json.encode(model(FLAT)))
    assert isinstance(got, ModelRecord) and got.retrain is not None
    assert parse_manifest(got.retrain.manifest).trainer == parse_manifest(SECTIONED).trainer
    assert [e["record"] for e in logs if "record" in e] == ["model/lm"]
    # a sectioned template is kept as written, comments and all
    commented = SECTIONED + "# keep me\n"
    again = _decode("model", msgspec.json.encode(model(commented)))
    assert isinstance(again, ModelRecord) and again.retrain is not None and again.retrain.manifest == commented


def test_every_flat_name_is_one_fields_and_moves_into_its_section() -> None:
    table = flat_fields()
    assert len({f.path for f in table.values()}) == len(table) == 50  # every field of the flat job
    for name, f in table.items():
        assert sectioned({name: "x"}) == {f.section: {f.name: "x"}}, name
        assert sectioned({camel(name): "x"}, camel) == {f.section: {camel(f.name): "x"}}, name
