"""The agent's configuration: defaults, the example file, environment overrides and clear errors."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from myolo.agent.config import load_agent_config
from myolo.common.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "systemd" / "agent.toml"


def test_defaults_node_id_from_hostname_and_paths_from_xdg(tmp_path):
    cfg = load_agent_config(None, env={"XDG_STATE_HOME": str(tmp_path)})
    assert cfg.node_id == socket.gethostname().split(".")[0]
    assert cfg.sample_interval_s == 1.0
    assert cfg.health.port == 8080
    assert cfg.leak.threshold_pct_per_h == 0.1
    assert cfg.simulate_gpus == 0
    assert cfg.data_dir == str(tmp_path / "myolo" / "agent")
    assert cfg.spool.dir == str(tmp_path / "myolo" / "agent" / "spool")
    assert cfg.control_socket == str(tmp_path / "myolo" / "agent" / "agent.sock")


def test_systemd_directories_are_used_when_set(tmp_path):
    env = {"STATE_DIRECTORY": str(tmp_path / "lib"), "RUNTIME_DIRECTORY": str(tmp_path / "run")}
    cfg = load_agent_config(None, env=env)
    assert cfg.spool.dir == str(tmp_path / "lib" / "spool")
    assert cfg.control_socket == str(tmp_path / "run" / "agent.sock")


def test_the_example_file_loads_with_its_documented_values(tmp_path):
    cfg = load_agent_config(EXAMPLE, env={"XDG_STATE_HOME": str(tmp_path)})
    assert cfg.spool.max_bytes == 256 << 20
    assert cfg.nccl.log_globs == ["/var/log/myolo/nccl.*.log"]
    assert cfg.kafka.client_id == "myolo-agent"


def test_environment_overrides_the_file(tmp_path):
    env = {
        "XDG_STATE_HOME": str(tmp_path),
        "MYOLO_NODE_ID": "gpu-node-017",
        "MYOLO_SAMPLE_INTERVAL_S": "0.5",
        "MYOLO_SPOOL_MAX_BYTES": str(64 << 20),
        "MYOLO_KAFKA_BOOTSTRAP": "k1:9092",
    }
    cfg = load_agent_config(EXAMPLE, env=env)
    assert (cfg.node_id, cfg.sample_interval_s, cfg.spool.max_bytes) == ("gpu-node-017", 0.5, 64 << 20)
    assert cfg.kafka.bootstrap == "k1:9092"


def test_the_address_is_loopback_on_simulated_gpus_else_the_host_names_or_the_configured_one(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path)}
    assert load_agent_config(None, env=env, simulate_gpus=2).address == "127.0.0.1"
    assert load_agent_config(None, env=env).address == socket.gethostbyname(socket.gethostname())
    assert load_agent_config(None, env={**env, "MYOLO_ADDRESS": "10.0.3.17"}, simulate_gpus=2).address == "10.0.3.17"
    assert load_agent_config(EXAMPLE, env=env, simulate_gpus=2).address == "127.0.0.1"  # the example's "" is auto


def test_simulate_gpus_from_the_command_line_wins(tmp_path):
    cfg = load_agent_config(None, env={"XDG_STATE_HOME": str(tmp_path), "MYOLO_SIMULATE_GPUS": "2"}, simulate_gpus=8)
    assert cfg.simulate_gpus == 8


@pytest.mark.parametrize(
    ("toml", "key", "reason"),
    [
        ("sample_interval_s = 0", "sample_interval_s", "Expected `float` > 0"),
        ("sample_intervall_s = 1", "sample_intervall_s", "unknown key"),
        ("[spool]\nfsync = 'sometimes'", "spool.fsync", "Invalid enum value 'sometimes'"),
        ("[health]\nport = 70000", "health.port", "<= 65535"),
        ("node_id = 'bad id!'", "node_id", "not a valid node id"),
        ("address = '10.0.0.1/24'", "address", "is not a host name or IP address"),
        ("address = 'http://node'", "address", "is not a host name or IP address"),
        ("[health]\nhost = 'a host'", "health.host", "is not a host name or IP address"),
        ("[spool]\nmax_bytes = 8388608\nsegment_bytes = 4194304", "spool.segment_bytes", "more than a quarter"),
    ],
)
def test_bad_values_name_the_key_and_the_reason(tmp_path, toml, key, reason):
    path = tmp_path / "agent.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as err:
        load_agent_config(path, env={"XDG_STATE_HOME": str(tmp_path)})
    assert err.value.key == key
    assert reason in err.value.reason


def test_bad_environment_value_names_the_variable(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_agent_config(None, env={"XDG_STATE_HOME": str(tmp_path), "MYOLO_SAMPLE_INTERVAL_S": "fast"})
    assert err.value.key == "sample_interval_s"
    assert "MYOLO_SAMPLE_INTERVAL_S" in err.value.reason


def test_a_control_socket_path_too_long_for_af_unix_is_refused(tmp_path):
    path = tmp_path / "agent.toml"
    path.write_text(f"control_socket = '/tmp/{'x' * 120}.sock'")
    with pytest.raises(ConfigError) as err:
        load_agent_config(path, env={"XDG_STATE_HOME": str(tmp_path)})
    assert err.value.key == "control_socket" and "107 bytes" in err.value.reason


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_agent_config(tmp_path / "nope.toml", env={})


def test_the_leak_section_is_the_detectors_own_settings_checked_as_the_file_loads(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path), "MYOLO_LEAK_WINDOW_S": "3600", "MYOLO_LEAK_REPORT_INTERVAL_S": "60"}
    cfg = load_agent_config(None, env=env)
    assert (cfg.leak.window_s, cfg.leak.report_interval_s, cfg.leak.short_window_s) == (3600.0, 60.0, 1800.0)
    with pytest.raises(ConfigError, match=r"leak\.short_window_s must be 0 or in \[4 x block_s, window_s\)"):
        load_agent_config(None, env={**env, "MYOLO_LEAK_WINDOW_S": "1200"})  # shorter than the short window
    with pytest.raises(ConfigError, match=r"leak\.threshold_pct_per_h must be > 0, got 0"):
        load_agent_config(None, env={"XDG_STATE_HOME": str(tmp_path), "MYOLO_LEAK_THRESHOLD_PCT_PER_H": "0"})
