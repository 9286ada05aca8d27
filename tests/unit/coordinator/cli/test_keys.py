"""``myoloctl keys generate``: a key pair the coordinator and the agents load, the private half 0600, never an
existing file overwritten."""

from __future__ import annotations

import stat
from pathlib import Path

from typer.testing import CliRunner

from myolo.common.keys import Ed25519Public, Ed25519Signer, load_signer, load_verify_key
from myolo.coordinator.cli.main import app


def test_generate_writes_a_private_key_0600_and_its_public_half(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "coordinator.key"
    result = CliRunner().invoke(app, ["keys", "generate", str(path)])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    signer = load_signer(path)
    public = load_verify_key(tmp_path / "etc" / "coordinator.key.pub", "commands.key_files[0]")
    assert isinstance(signer, Ed25519Signer) and isinstance(public, Ed25519Public)
    assert public.key_id == signer.key_id and f"key id:      {signer.key_id}" in result.output
    assert "[signing] key_file" in result.output and "[commands] key_files" in result.output


def test_generate_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "coordinator.key"
    assert CliRunner().invoke(app, ["keys", "generate", str(path)]).exit_code == 0
    before = path.read_bytes()
    result = CliRunner().invoke(app, ["keys", "generate", str(path)])
    assert result.exit_code == 2 and "already exists" in result.output and path.read_bytes() == before
    path.unlink()  # the .pub left behind from the old key is not overwritten either
    result = CliRunner().invoke(app, ["keys", "generate", str(path)])
    assert result.exit_code == 2 and "coordinator.key.pub already exists" in result.output and not path.exists()
