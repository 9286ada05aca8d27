"""``myolo-coordinator run`` refuses a bad configuration with the key at fault and exit code 2."""

from __future__ import annotations

from typer.testing import CliRunner

from myolo.coordinator.cli_daemon import app


def test_missing_key_file_is_named(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('instance_id = "c1"\n[kafka]\nbootstrap = "127.0.0.1:1"\n')
    result = CliRunner().invoke(app, ["run", "--config", str(cfg)], env={"MYOLO_SIGNING_KEY_FILE": ""})
    assert result.exit_code == 2
    assert "signing.key_file" in result.output and "required" in result.output


def test_bad_value_is_named(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[fleet]\nlost_after_s = -1\n")
    result = CliRunner().invoke(app, ["run", "--config", str(cfg)])
    assert result.exit_code == 2 and "fleet.lost_after_s" in result.output
