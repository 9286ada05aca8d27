"""The trainer's records: what reaches the launcher's screen and --json, and what reaches the agent."""

from __future__ import annotations

import io
import json
import math

import msgspec

from myolo.events.payloads import TrainingProgress
from myolo.kernels.train import progress
from myolo.kernels.train.records import DISPLAY_ONLY, EndRecord, StepRecord, progress_payload

FIELDS = {  # every field of a step on CPU, none at its default
    "step": 3,
    "steps": 9,
    "loss": 2.5,
    "tokens_per_s": 12345.0,
    "step_time_s": 0.25,
    "grad_norm": 0.5,
    "lr": 3e-4,
    "mfu": 0.41,
    "gradient_staleness": 2,
    "backends": {"rms_norm": "native", "attention": "native"},
    "host_rss_bytes": 1 << 30,
}


def step(**changes: object) -> StepRecord:
    return StepRecord(**{**FIELDS, **changes})  # type: ignore[arg-type]


def test_step_records_roundtrip_and_render() -> None:
    rec = step()
    buf = io.StringIO()
    progress.emit(rec, buf)
    assert progress.parse(buf.getvalue().strip()) == rec
    assert progress.parse("some library print") is None
    assert progress.parse(progress.RECORD_PREFIX + '{"event": "step", "step": "three"}') is None
    line = progress.format_line(rec)
    assert "step 3/9" in line and "loss 2.5000" in line and "12.35k tok/s" in line
    assert "250 ms/step" in line and "MFU 41.0%" in line and "stale 2" in line
    out = io.StringIO()
    progress.Renderer(as_json=True, stream=out).show(rec)
    assert json.loads(out.getvalue()) == {"event": "step", **FIELDS}  # no CUDA memory fields on CPU


def test_a_loss_not_yet_known_is_written_as_nan_as_before() -> None:
    end = EndRecord(steps=5, loss=float("nan"), tokens_per_s=0.0, stopped_early=False)
    out = io.StringIO()
    progress.Renderer(as_json=True, stream=out).show(end)
    assert out.getvalue() == '{"event": "end", "loss": NaN, "steps": 5, "stopped_early": false, "tokens_per_s": 0.0}\n'
    buf = io.StringIO()
    progress.emit(end, buf)
    back = progress.parse(buf.getvalue().strip())
    assert isinstance(back, EndRecord) and math.isnan(back.loss)


def test_every_field_the_trainer_reports_reaches_training_progress() -> None:
    rec = step(mem_allocated_bytes=7 << 30, mem_reserved_bytes=8 << 30)  # no field left at its default
    payload = progress_payload(rec, job_id="job-1", rank=5, world_size=8, dp_rank=1, replica_loss=2.25)
    reported = set(StepRecord.__struct_fields__) - DISPLAY_ONLY
    assert reported <= set(TrainingProgress.__struct_fields__), reported - set(TrainingProgress.__struct_fields__)
    for name in reported - {"loss"}:
        assert getattr(payload, name) == getattr(rec, name), name
    assert payload.loss == 2.25  # the replica's own loss, not the mean over replicas
    assert (payload.job_id, payload.rank, payload.world_size, payload.dp_rank) == ("job-1", 5, 8, 1)
    assert msgspec.json.decode(msgspec.json.encode(payload), type=TrainingProgress) == payload
