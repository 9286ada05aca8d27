"""spec.trainer is derived from the trainer job's sections: every TrainerJob field has its place in a manifest
(its section's camelCase key, or where ELSEWHERE says), and a job written as spec.trainer reads back as itself."""

from __future__ import annotations

import msgspec
import yaml

from myolo.coordinator.jobs.manifest import (
    API_VERSIONS,
    ELSEWHERE,
    SECTION_SPECS,
    camel,
    manifest_field,
    parse_manifest,
    trainer_spec,
)
from myolo.events.payloads.trainer_fields import trainer_fields
from myolo.events.payloads.trainer_job import TrainerJob


def test_every_field_has_a_place_in_the_manifest() -> None:
    for f in trainer_fields(TrainerJob):
        where = manifest_field(f.path)
        if f.path in ELSEWHERE:
            assert where == ELSEWHERE[f.path] and not where.startswith("spec.trainer."), f.path
            continue
        assert where == f"spec.trainer.{f.section}.{camel(f.name)}", f.path
        assert camel(f.name) in {g.encode_name for g in msgspec.structs.fields(SECTION_SPECS[f.section])}, f.path


def test_a_job_written_as_spec_trainer_reads_back_as_itself() -> None:
    job = TrainerJob.from_fields(
        {
            "model.args": {"n_layers": 4},
            "data.path": "/data/train.bin",
            "data.seq_len": 32,
            "optimizer.lr": 1e-3,
            "optimizer.warmup_steps": 5,
            "checkpoint.dir": "/ckpt",
            "checkpoint.export_path": "/out/model.safetensors",
            "defense.kind": "gradient_compression",
            "runtime.ops_prefer": {"*": ["reference"]},
        }
    )
    written = trainer_spec(job)
    assert written["optimizer"] == {"lr": 1e-3, "warmupSteps": 5} and "model" in written and "watermark" not in written
    doc = {"apiVersion": API_VERSIONS[0], "kind": "ElasticJob", "metadata": {"name": "back"}}
    doc["spec"] = {"minReplicas": 1, "maxReplicas": 1, "trainer": written}
    assert parse_manifest(yaml.safe_dump(doc)).trainer == job
