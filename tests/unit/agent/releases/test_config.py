"""The ``[releases]`` section: its defaults, the example file, a relative directory refused, the local stack's."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from myolo.agent.config import load_agent_config
from myolo.common.errors import ConfigError
from myolo.coordinator.localstack import configs

ROOT = Path(__file__).resolve().parents[4]


def test_defaults_and_the_example_file_agree(tmp_path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path)}
    default = load_agent_config(None, env=env).releases
    example = load_agent_config(ROOT / "systemd" / "agent.toml", env=env).releases
    assert default == example
    assert (default.dir, default.keep, default.max_artifact_bytes, default.restart) == (
        "/opt/myolo/releases",
        3,
        1 << 30,
        "auto",
    )
    unit = (ROOT / "systemd" / "myolo-agent.service").read_text()
    # the launcher, not the unit, puts the current link on the agent's path: it must run from the base install
    assert "PYTHONPATH" not in unit.split("[Service]")[1].split("#")[0]
    assert "\nEnvironment=PYTHONPATH" not in unit
    assert "ExecStart=/opt/myolo/venv/bin/myolo-agent-launcher " in unit
    assert f"ReadWritePaths=-{default.dir}\n" in unit


def test_the_environment_overrides_and_a_relative_directory_is_refused(tmp_path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path), "MYOLO_RELEASES_DIR": "~/rel", "MYOLO_RELEASES_RESTART": "exec"}
    cfg = load_agent_config(None, env=env).releases
    assert cfg.dir == str(Path.home() / "rel") and cfg.restart == "exec"
    with pytest.raises(ConfigError, match=r"releases\.dir: 'rel' is a relative path"):
        load_agent_config(None, env={**env, "MYOLO_RELEASES_DIR": "rel"})
    with pytest.raises(ConfigError, match=r"releases\.keep"):
        load_agent_config(None, env={**env, "MYOLO_RELEASES_KEEP": "1"})


def test_the_local_stack_installs_under_each_agents_directory_with_short_trials(tmp_path) -> None:
    doc = configs.agent_config(
        "node-1", tmp_path, bootstrap="127.0.0.1:9092", gpus=1, health_port=0, key_file=tmp_path / "k"
    )
    parsed = tomllib.loads(configs.toml(doc))
    assert parsed["releases"] == {"dir": str(tmp_path / "releases"), "commit_timeout_s": 30.0, "watchdog_s": 10.0}
