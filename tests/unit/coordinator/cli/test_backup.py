"""``myoloctl backup`` and ``restore`` without a broker: what is refused before any cluster is reached (a key file
among the configs, an unknown topic, an archive that does not verify, files in the way), and ``restore --dry-run``
listing a good archive while writing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from myolo.coordinator.cli.main import app
from tests.unit.coordinator.backup.test_archive import contents, good_archive

NO_BROKER = ["--bootstrap", "127.0.0.1:1"]  # never connected to: everything here is refused first


@pytest.fixture(autouse=True)
def _no_local_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYOLO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MYOLO_KAFKA_BOOTSTRAP", raising=False)


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_backup_refuses_a_key_file_naming_it_and_writes_nothing(tmp_path: Path) -> None:
    key = tmp_path / "coordinator.key"
    key.write_text("secret")
    out = tmp_path / "b.tar.gz"
    result = run("backup", "--output", str(out), "--config", str(key), *NO_BROKER)
    assert result.exit_code == 2, result.output
    assert str(key) in result.output and "key, token or password file" in result.output
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["coordinator.key"]


def test_backup_refuses_an_unknown_topic_and_an_existing_output(tmp_path: Path) -> None:
    result = run("backup", "--topics", "jobs,samples", "--output", str(tmp_path / "b.tar.gz"), *NO_BROKER)
    assert result.exit_code == 2 and "'samples' is not a state topic" in result.output
    taken = tmp_path / "taken.tar.gz"
    taken.write_bytes(b"keep me")
    result = run("backup", "--output", str(taken), "--no-configs", *NO_BROKER)
    assert result.exit_code == 2 and "already exists" in result.output and taken.read_bytes() == b"keep me"


def test_restore_dry_run_lists_a_good_archive_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "b.tar.gz"
    good_archive(tmp_path)
    result = run("restore", str(path), "--dry-run", "--restore-configs", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "myolo.state.jobs" in result.output and "keeps latest-per-key" in result.output
    assert "config      configs/coordinator.toml (from /etc/myolo/coordinator.toml)" in result.output
    assert f"verified {len(contents()) + 1} members" in result.output and "nothing written" in result.output
    assert not (tmp_path / "out").exists()


def test_restore_refuses_a_damaged_archive_with_the_reason(tmp_path: Path) -> None:
    data = bytearray(good_archive(tmp_path))
    data[len(data) - 6] ^= 0xFF
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(bytes(data))
    result = run("restore", str(bad), *NO_BROKER)
    assert result.exit_code == 2 and "refused" in result.output and "CRC check failed" in result.output
    result = run("restore", str(tmp_path / "absent.tar.gz"), "--dry-run")
    assert result.exit_code == 2 and "cannot read" in result.output


def test_restore_refuses_files_in_the_way_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "b.tar.gz"
    good_archive(tmp_path)
    dest = tmp_path / "out"
    (dest / "configs").mkdir(parents=True)
    (dest / "configs" / "coordinator.toml").write_text("mine")
    result = run("restore", str(path), "--dry-run", "--restore-configs", str(dest))
    assert result.exit_code == 2 and "coordinator.toml' already exists" in result.output
    assert run("restore", str(path), "--dry-run", "--force", "--restore-configs", str(dest)).exit_code == 0
