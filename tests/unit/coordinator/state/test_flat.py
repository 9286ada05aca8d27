"""Job and rollout records written flat, before spec and status were apart, still read as the records."""

from __future__ import annotations

import msgspec
import pytest

from myolo.coordinator.jobs.records import JobRecord
from myolo.coordinator.rollouts.records import RolloutRecord, RolloutSpec, RolloutStatus, Wave
from myolo.coordinator.state import BadStateRecord, StateCodec
from myolo.coordinator.state.codec import KIND_HEADER
from tests.support.coordinator.memory_jobs import running_job

CODEC = StateCodec({"job": JobRecord, "rollout": RolloutRecord})


def _flat(record: msgspec.Struct, spec_names: dict[str, str]) -> bytes:
    """The record as the flat shape wrote it: spec's fields (new name -> old name) and status's at the top."""
    nested = msgspec.to_builtins(record)
    flat = {k: v for k, v in nested.items() if k not in ("spec", "status")}
    flat.update({spec_names.get(k, k): v for k, v in nested["spec"].items()})
    flat.update(nested["status"])
    return msgspec.json.encode(flat)


def _decode(kind: str, raw: bytes) -> msgspec.Struct:
    return CODEC.decode(raw, [(KIND_HEADER, kind.encode())])


def test_a_flat_job_record_reads_as_the_same_job() -> None:
    job = running_job(1000.0)
    assert _decode("job", _flat(job, {"job": "spec"})) == job


def test_a_flat_rollout_record_reads_as_the_same_rollout() -> None:
    spec = RolloutSpec(component="agent", version="4.1.0", artifact="/srv/a.whl", sha256="a" * 64, by="op")
    status = RolloutStatus(updated=5.0, phase="Progressing", waves=[Wave(index=0, percent=5, nodes=["n1"])])
    rollout = RolloutRecord(name="r1", created=1.0, spec=spec, status=status)
    assert _decode("rollout", _flat(rollout, {})) == rollout


def test_a_record_of_neither_shape_is_still_refused() -> None:
    with pytest.raises(BadStateRecord, match="job record does not decode"):
        _decode("job", b'{"name": "x", "created": 1, "spec": {"job": 3}, "status": {}}')
    with pytest.raises(BadStateRecord, match="rollout record does not decode"):
        _decode("rollout", b'{"name": "x", "created": "yesterday"}')
    with pytest.raises(BadStateRecord, match="job record does not decode"):
        _decode("job", b"[1, 2]")


def test_a_deeply_nested_record_is_refused_not_raised() -> None:
    """The typed decoder stops at the first wrong field; the flat reading must not recurse into the rest."""
    deep = b'{"name": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(BadStateRecord, match="nested too deeply"):
        _decode("job", deep)
