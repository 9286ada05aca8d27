"""``myolo-agent fleetsim`` as a command: its options, and bad values refused before anything starts."""

from __future__ import annotations

from typer.testing import CliRunner

from myolo.agent.fleetsim.cli import app

runner = CliRunner()


def test_help_names_every_option() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for option in ("--nodes", "--gpus", "--duration", "--fault-rate", "--rate", "--bootstrap"):
        assert option in result.output


def test_bad_values_are_refused_naming_the_option() -> None:
    for args, option in (
        (["--nodes", "0"], "--nodes"),
        (["--gpus", "65"], "--gpus"),
        (["--fault-rate", "-1"], "--fault-rate"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, args
        assert option in result.output, result.output


def test_no_broker_anywhere_is_a_clear_error(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("MYOLO_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("MYOLO_STATE_DIR", str(tmp_path))  # no local stack recorded here
    monkeypatch.setenv("HOME", str(tmp_path))
    result = runner.invoke(app, ["--nodes", "1", "--duration", "1"])
    assert result.exit_code == 2
    assert "kafka.bootstrap" in result.output and "MYOLO_KAFKA_BOOTSTRAP" in result.output
