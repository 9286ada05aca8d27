"""The coordinator's configuration: defaults, overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from myolo.common.errors import ConfigError
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.config import load_coordinator_config
from tests.support.api_auth import shared
from tests.support.helpers import write_key

TOKENS = {"MYOLO_API_TOKENS_FILE": str(shared()[0])}  # the API authenticates: its tokens file is required


@pytest.fixture
def key(tmp_path: Path) -> str:
    return str(write_key(tmp_path / "k", "00" * 32))


def test_defaults_and_env_overrides(key) -> None:
    cfg = load_coordinator_config(
        None, components=COMPONENTS, env={**TOKENS, "MYOLO_SIGNING_KEY_FILE": key, "MYOLO_INSTANCE_ID": "c1"}
    )
    assert (cfg.fleet.lost_after_s, cfg.fleet.suspect_after_intervals, cfg.cordons.act_on_warn) == (10.0, 3, False)
    assert cfg.api.url() == "http://127.0.0.1:8480" and cfg.instance_id == "c1"
    cfg = load_coordinator_config(
        None,
        components=COMPONENTS,
        env={
            **TOKENS,
            "MYOLO_SIGNING_KEY_FILE": key,
            "MYOLO_FLEET_LOST_AFTER_S": "4.5",
            "MYOLO_CORDONS_ACT_ON_WARN": "true",
        },
        api_port=9000,
    )
    assert cfg.fleet.lost_after_s == 4.5 and cfg.cordons.act_on_warn and cfg.api.port == 9000 and cfg.instance_id


def test_toml_file(tmp_path: Path, key) -> None:
    p = tmp_path / "c.toml"
    p.write_text(f'instance_id = "c9"\n[signing]\nkey_file = "{key}"\n[api]\nadvertise_url = "http://c9:80/"\n')
    cfg = load_coordinator_config(p, components=COMPONENTS, env=TOKENS)
    assert cfg.instance_id == "c9" and cfg.api.url() == "http://c9:80"


@pytest.mark.parametrize(
    ("env", "key_name", "words"),
    [
        ({}, "signing.key_file", "required"),
        ({"MYOLO_SIGNING_KEY_FILE": "/nonexistent/k"}, "signing.key_file", "does not exist"),
        ({"MYOLO_FLEET_LOST_AFTER_S": "0"}, "fleet.lost_after_s", ">"),
        ({"MYOLO_FLEET_MAX_NODES": "0"}, "fleet.max_nodes", ">="),
        ({"MYOLO_INGEST_FROM": "middle"}, "ingest_from", "middle"),
        ({"MYOLO_LEADER_HEARTBEAT_INTERVAL_MS": "3000"}, "leader.heartbeat_interval_ms", "a third"),
        ({"MYOLO_COMMANDS_RETRY_AFTER_S": "0.1"}, "commands.retry_after_s", "tick_s"),
        ({"MYOLO_COMMANDS_EXPIRE_AFTER_S": "2"}, "commands.expire_after_s", "retry_after_s"),
    ],
)
def test_errors_name_the_key(env, key_name, words, key) -> None:
    if "MYOLO_SIGNING_KEY_FILE" not in env and key_name != "signing.key_file":
        env = {**env, **TOKENS, "MYOLO_SIGNING_KEY_FILE": key}
    with pytest.raises(ConfigError) as exc:
        load_coordinator_config(None, components=COMPONENTS, env=env)
    assert exc.value.key == key_name and words in str(exc.value)


def test_unknown_key_and_bad_port(tmp_path: Path, key) -> None:
    p = tmp_path / "c.toml"
    p.write_text("lost_after_s = 3\n")  # a fleet key at the top level: named, with the fix
    with pytest.raises(ConfigError, match=r"did you mean fleet\.lost_after_s"):
        load_coordinator_config(p, components=COMPONENTS, env={**TOKENS, "MYOLO_SIGNING_KEY_FILE": key})
    p.write_text("lost_after = 3\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_coordinator_config(p, components=COMPONENTS, env={**TOKENS, "MYOLO_SIGNING_KEY_FILE": key})
    with pytest.raises(ConfigError, match=r"api\.port"):
        load_coordinator_config(
            None, components=COMPONENTS, env={**TOKENS, "MYOLO_SIGNING_KEY_FILE": key}, api_port=70000
        )


def test_the_example_config_is_valid(key) -> None:
    example = Path(__file__).resolve().parents[3] / "systemd" / "coordinator.toml"
    cfg = load_coordinator_config(example, components=COMPONENTS, env={**TOKENS, "MYOLO_SIGNING_KEY_FILE": key})
    assert cfg.api.port == 8480 and cfg.leader.session_timeout_ms == 6000
    assert cfg.fleet.lost_after_s == 10.0 and cfg.commands.retry_after_s == 5.0 and not cfg.cordons.act_on_warn
    from myolo.coordinator.drift.rule import DriftRule

    assert cfg.drift.rule == DriftRule()  # the file states the defaults as they are
    assert cfg.drift.retrain and cfg.registry.max_models == 1000
