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
    job = JobConfig(data_path=str(data_file), data_sha256=sha(DATA)).validate()
    check_inputs_sha256(job, 0)
    other = JobConfig(data_path="/nonexistent/file.bin", data_sha256=sha(b"x"))
    check_inputs_sha256(other, 1)  # not rank 0: nothing read
    check_inputs_sha256(JobConfig(data_path=str(data_file)), 0)  # no digest recorded: nothing to check


def test_other_bytes_are_refused_naming_data_sha256(data_file: Path) -> None:
    job = JobConfig(data_path=str(data_file), data_sha256=sha(b"the data as recorded"))
    with pytest.raises(JobConfigError) as caught:
        check_inputs_sha256(job, 0)
    assert caught.value.field == "data_sha256"
    assert f"hashes to {sha(DATA)}" in str(caught.value) and "dataSha256" in str(caught.value)


def test_a_missing_file_is_refused_naming_data_sha256(tmp_path: Path) -> None:
    job = JobConfig(data_path=str(tmp_path / "gone.bin"), data_sha256=sha(b""))
    with pytest.raises(JobConfigError, match="cannot read it to check data_sha256") as caught:
        check_inputs_sha256(job, 0)
    assert caught.value.field == "data_sha256"


@pytest.mark.parametrize(
    ("job", "says"),
    [
        ({"data_path": "d.bin", "data_sha256": "ABC"}, "lowercase hex (64 digits"),
        ({"data_path": "d.bin", "data_sha256": sha(b"x").upper()}, "lowercase hex"),
        ({"data_sha256": sha(b"x")}, "data_sha256 needs --data"),
    ],
)
def test_bad_digests_name_the_field(job: dict, says: str) -> None:
    with pytest.raises(JobConfigError) as caught:
        JobConfig(**job).validate()
    assert caught.value.field == "data_sha256" and says in str(caught.value)


def test_the_agents_check_names_the_wire_field() -> None:
    request = read_request(json.dumps({"job": {"data_sha256": sha(b"x")}, "world_size": 1}).encode())
    verdict = judge(request)
    assert (verdict.ok, verdict.field) == (False, "job.data_sha256")


def test_init_from_is_checked_against_its_digest_the_same_way(data_file: Path) -> None:
    check_inputs_sha256(JobConfig(init_from=str(data_file), init_from_sha256=sha(DATA)).validate(), 0)
    job = JobConfig(init_from=str(data_file), init_from_sha256=sha(b"the weights as registered")).validate()
    with pytest.raises(JobConfigError) as caught:
        check_inputs_sha256(job, 0)
    assert caught.value.field == "init_from_sha256" and "initFromSha256" in str(caught.value)
    with pytest.raises(JobConfigError, match="init_from_sha256 needs --init-from"):
        JobConfig(init_from_sha256=sha(DATA)).validate()
