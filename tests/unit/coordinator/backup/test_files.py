"""What a backup takes besides the topics: configs (key, token and password files refused by name, inline secrets
redacted, names kept unique) and each job's checkpoint manifests (missing ones listed, not an error); the topic
names and the output a backup accepts."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest

from myolo.common.keys import Ed25519Signer
from myolo.coordinator.backup.files import (
    PLACEHOLDER,
    Collected,
    RefusedFile,
    collect_checkpoints,
    collect_configs,
    default_configs,
    job_checkpoint_dirs,
    redact,
)
from myolo.coordinator.backup.make import BackupError, check_output, default_output, resolve_topics
from myolo.coordinator.backup.schema import Record, check_name
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.coordinator import state_topics
from myolo.coordinator.jobs.manifest import parse_manifest
from myolo.coordinator.jobs.records import JobRecord, JobSpec, JobStatus

MANIFEST = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: {name}}}
spec:
  minReplicas: 1
  maxReplicas: 2
  replica: {{tp: 1, pp: 1}}
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: 10}}}}
  checkpointDir: {ckpt}
"""

STATE = state_topics(COMPONENTS)


def job_record(name: str, ckpt: Path, offset: int) -> Record:
    spec = parse_manifest(MANIFEST.format(name=name, ckpt=ckpt))
    job = JobRecord(name=name, created=time.time(), spec=JobSpec(job=spec), status=JobStatus(updated=time.time()))
    headers: list[tuple[str, bytes | None]] = [("myolo-state-kind", b"job")]
    return Record(
        partition=0, offset=offset, timestamp=0, key=name.encode(), value=msgspec.json.encode(job), headers=headers
    )


@pytest.mark.parametrize("name", ["coordinator.key", "api-tokens", "kafka-password", "admin.secret", "ca.p12"])
def test_key_token_and_password_files_are_refused_by_name(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("x = 1\n")
    with pytest.raises(RefusedFile) as exc:
        collect_configs([path], Collected())
    assert str(path) in str(exc.value) and "key, token or password file" in str(exc.value)


def test_a_file_holding_a_private_key_is_refused_whatever_its_name(tmp_path: Path) -> None:
    path = tmp_path / "innocent.toml"
    path.write_bytes(Ed25519Signer.generate().pem())
    with pytest.raises(RefusedFile, match="holds a private key"):
        collect_configs([path], Collected())


def test_inline_secrets_are_redacted_and_paths_to_secret_files_kept() -> None:
    text = (
        '[kafka]\nsasl_password = "hunter2"\nsasl_password_file = "/etc/myolo/kafka.password"\n'
        '# password = "in a comment"\n[api]\ntokens_file = "/etc/myolo/api-tokens"\nauth = "tokens"\n'
        'admin_token = "abc"  # inline\n'
    )
    out, keys = redact(text)
    assert keys == ["sasl_password", "admin_token"]
    assert "hunter2" not in out and "abc" not in out and out.count(PLACEHOLDER) == 2
    assert 'sasl_password_file = "/etc/myolo/kafka.password"' in out and 'tokens_file = "/etc/myolo/api-tokens"' in out
    assert '# password = "in a comment"' in out and out.count("\n") == text.count("\n")


def test_configs_get_unique_member_names(tmp_path: Path) -> None:
    paths = []
    for name in ("coordinator-1", "coordinator-2"):
        p = tmp_path / "coordinators" / name / "coordinator.toml"
        p.parent.mkdir(parents=True)
        p.write_text(f'instance_id = "{name}"\n[kafka]\nsasl_password = "s3cret"\n')
        paths.append(p)
    got = Collected()
    collect_configs(paths, got)
    assert [c.member for c in got.configs] == ["configs/coordinator.toml", "configs/coordinator-2-coordinator.toml"]
    assert [c.source for c in got.configs] == [str(p) for p in paths]
    assert got.configs[0].redacted == ["sasl_password"] and b"s3cret" not in got.files[1].data
    for f in got.files:
        check_name(f.member)
    assert default_configs(tmp_path, etc=tmp_path / "no-etc") == paths


def test_an_unreadable_or_missing_config_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(RefusedFile, match=r"missing\.toml.* is not a regular file"):
        collect_configs([tmp_path / "missing.toml"], Collected())
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(RefusedFile, match="not UTF-8"):
        collect_configs([tmp_path / "bin.toml"], Collected())


def test_checkpoint_manifests_of_every_job_and_the_missing_ones_listed(tmp_path: Path) -> None:
    root = tmp_path / "ckpt-a"
    for step in (20, 40):
        (root / f"step-{step:08d}").mkdir(parents=True)
        (root / f"step-{step:08d}" / ".metadata").write_bytes(b"meta-%d" % step)
        (root / f"step-{step:08d}" / "__0_0.distcp").write_bytes(b"tensors")  # never taken
    (root / "step-00000060").mkdir()  # a save in progress: no .metadata yet
    (root / "latest.json").write_text('{"step": 40}')
    (root / "not-a-step").mkdir()
    records = [job_record("a", root, 0), job_record("b", tmp_path / "nowhere", 1)]
    records.append(Record(partition=0, offset=2, timestamp=0, key=b"c", value=None, headers=[]))  # deleted job
    dirs = job_checkpoint_dirs(records)
    assert dirs == {"a": str(root), "b": str(tmp_path / "nowhere")}
    got = Collected()
    collect_checkpoints(dirs, got)
    a, b = got.checkpoints
    assert a.members == [
        "checkpoints/a/latest.json",
        "checkpoints/a/step-00000020/.metadata",
        "checkpoints/a/step-00000040/.metadata",
    ]
    assert len(a.missing) == 1 and "step-00000060/.metadata" in a.missing[0]
    assert b.members == [] and b.missing and str(tmp_path / "nowhere") in b.missing[0]
    assert {f.member: f.data for f in got.files}["checkpoints/a/step-00000040/.metadata"] == b"meta-40"


def test_topic_names_short_or_full_and_unknown_ones_refused() -> None:
    assert resolve_topics(["jobs,registry", "myolo.state.node-keys", "jobs"], STATE) == [
        "myolo.state.jobs",
        "myolo.state.registry",
        "myolo.state.node-keys",
    ]
    with pytest.raises(BackupError, match="'samples' is not a state topic"):
        resolve_topics(["samples"], STATE)
    with pytest.raises(BackupError, match="not a state topic"):
        resolve_topics(["myolo.node.samples"], STATE)


def test_the_output_name_and_its_checks(tmp_path: Path) -> None:
    assert default_output(0).name == "myolo-backup-19700101-000000.tar.gz"
    taken = tmp_path / "b.tar.gz"
    taken.write_bytes(b"")
    with pytest.raises(BackupError, match="already exists"):
        check_output(taken)
    with pytest.raises(BackupError, match="does not exist"):
        check_output(tmp_path / "nope" / "b.tar.gz")
    with pytest.raises(BackupError, match=r"should end in \.tar\.gz"):
        check_output(tmp_path / "b.zip")
