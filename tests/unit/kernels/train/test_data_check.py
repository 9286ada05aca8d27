"""``data_sha256``: the job's rules (what the agent's check_job answers) and rank 0's check of the file at start."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from myolo.kernels.cli.check_job import judge, read_request
from myolo.kernels.train.config import JobConfig, JobConfigError
from myolo.kernels.train.data_check import check_inputs_sha256

DATA = bytes(range(256)) * 64


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.bin"
    path.write_bytes(DATA)
    return path


def test_a_matching_file_passes_and_rank_1_never_reads(data_file: Path) -> None:
    job = JobConfig.from_fields({"data.path": str(data_file), "data.sha256": sha(DATA)}).validate()
    check_inputs_sha256(job, 0)
    other = JobConfig.from_fields({"data.path": "/nonexistent/file.bin", "data.sha256": sha(b"x")})
    check_inputs_sha256(other, 1)  # not rank 0: nothing read
    check_inputs_sha256(JobConfig.from_fields({"data.path": str(data_file)}), 0)  # no digest recorded: nothing to check


def test_other_bytes_are_refused_naming_data_sha256(data_file: Path) -> None:
    job = JobConfig.from_fields({"data.path": str(data_file), "data.sha256": sha(b"the data as recorded")})
    with pytest.raises(JobConfigError) as caught:
        check_inputs_sha256(job, 0)
    assert caught.value.field == "data.sha256"
    assert f"hashes to {sha(DATA)}" in str(caught.value) and "spec.trainer.data.sha256" in str(caught.value)


def test_a_missing_file_is_refused_naming_data_sha256(tmp_path: Path) -> None:
    job = JobConfig.from_fields({"data.path": str(tmp_path / "gone.bin"), "data.sha256": sha(b"")})
    with pytest.raises(JobConfigError, match=r"cannot read .* to check it") as caught:
        check_inputs_sha256(job, 0)
    assert caught.value.field == "data.sha256"


@pytest.mark.parametrize(
    ("job", "says"),
    [
        ({"data.path": "d.bin", "data.sha256": "ABC"}, "(--data-sha256): Expected `str` matching regex"),
        ({"data.path": "d.bin", "data.sha256": sha(b"x").upper()}, "matching regex"),
        ({"data.sha256": sha(b"x")}, "synthetic data has none: set --data"),
    ],
)
def test_bad_digests_name_the_field(job: dict, says: str) -> None:
    with pytest.raises(JobConfigError) as caught:
        JobConfig.from_fields(job).validate()
    assert caught.value.field == "data.sha256" and says in str(caught.value)


def test_the_agents_check_names_the_wire_field() -> None:
    request = read_request(json.dumps({"job": {"data": {"sha256": sha(b"x")}}, "world_size": 1}).encode())
    verdict = judge(request)
    assert (verdict.ok, verdict.field) == (False, "job.data.sha256")


def test_init_from_is_checked_against_its_digest_the_same_way(data_file: Path) -> None:
    check_inputs_sha256(
        JobConfig.from_fields(
            {"checkpoint.init_from": str(data_file), "checkpoint.init_from_sha256": sha(DATA)}
        ).validate(),
        0,
    )
    job = JobConfig.from_fields(
        {"checkpoint.init_from": str(data_file), "checkpoint.init_from_sha256": sha(b"the weights as registered")}
    ).validate()
    with pytest.raises(JobConfigError) as caught:
        check_inputs_sha256(job, 0)
    assert caught.value.field == "checkpoint.init_from_sha256" and "initFromSha256" in str(caught.value)
    with pytest.raises(JobConfigError, match="set --init-from"):
        JobConfig.from_fields({"checkpoint.init_from_sha256": sha(DATA)}).validate()
