"""The local stack's generated files: configs the real loaders accept, one private signing key, clean env."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from myolo.common.keys import Ed25519Public, Ed25519Signer, load_signer, load_verify_key, public_path
from myolo.coordinator.api.tokens import TokenStore
from myolo.coordinator.cli.auth import stack_token
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.config import load_coordinator_config
from myolo.coordinator.localstack import configs, stack
from myolo.coordinator.localstack.broker import state
from tests.support.helpers import write_key


def test_signing_key_is_private_stable_and_loadable(tmp_path: Path) -> None:
    key = configs.signing_key(tmp_path)
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert configs.signing_key(tmp_path).read_text() == key.read_text()  # not regenerated
    signer = load_signer(key)
    public = load_verify_key(public_path(key), "commands.key_files[0]")
    assert isinstance(signer, Ed25519Signer) and isinstance(public, Ed25519Public)
    assert public.key_id == signer.key_id


def test_a_legacy_hmac_stack_key_is_replaced_by_an_ed25519_one(tmp_path: Path) -> None:
    write_key(tmp_path / configs.KEY_FILE)
    assert isinstance(load_signer(configs.signing_key(tmp_path)), Ed25519Signer)
    assert public_path(tmp_path / configs.KEY_FILE).exists()


def test_toml_writer_round_trips() -> None:
    doc = {"a": 'x "quoted" \\ path', "n": 3, "f": 0.5, "b": True, "l": ["p", "q"], "s": {"k": "v", "m": [1]}}
    assert tomllib.loads(configs.toml(doc)) == doc
    with pytest.raises(TypeError):
        configs.toml({"bad": object()})


def test_coordinator_config_is_accepted_by_the_coordinator(tmp_path: Path) -> None:
    key = configs.signing_key(tmp_path)
    path = tmp_path / "coordinator.toml"
    doc = configs.coordinator_config("coordinator-1", tmp_path, bootstrap="127.0.0.1:9092", api_port=8123, key_file=key)
    path.write_text(configs.toml(doc))
    cfg = load_coordinator_config(path, components=COMPONENTS, env={})
    assert (cfg.instance_id, cfg.api.url(), cfg.kafka.bootstrap) == (
        "coordinator-1",
        "http://127.0.0.1:8123",
        "127.0.0.1:9092",
    )
    # authentication is on: the stack's admin token (what myoloctl sends to it) is in the tokens file
    assert TokenStore(cfg.api.tokens_file).match(stack_token(tmp_path)).role == "admin"


def test_agent_config_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = configs.signing_key(tmp_path)
    doc = configs.agent_config("node-1", tmp_path, bootstrap="127.0.0.1:9092", gpus=2, health_port=9000, key_file=key)
    parsed = tomllib.loads(configs.toml(doc))
    assert parsed["simulate_gpus"] == 2 and parsed["health"]["port"] == 9000
    assert parsed["control_socket"] == str(tmp_path / "agent.sock")
    env = configs.agent_env(key)
    assert env["MYOLO_COMMANDS_ENABLED"] == "true"
    assert json.loads(env["MYOLO_COMMANDS_KEY_FILES"]) == [str(key) + ".pub"]  # the public half only
    # the operator's own overrides never leak into stack processes (they would point them elsewhere)
    monkeypatch.setenv("MYOLO_KAFKA_BOOTSTRAP", "elsewhere:9092")
    child = stack._child_env(env)
    assert "MYOLO_KAFKA_BOOTSTRAP" not in child and child["MYOLO_COMMANDS_ENABLED"] == "true"
    assert str(stack.REPO_ROOT) in child["PYTHONPATH"].split(":")


def test_start_without_kafka_says_to_start_it(tmp_path: Path) -> None:
    with pytest.raises(stack.StackError) as caught:
        stack.start_members(tmp_path, coordinators=1, nodes=1, gpus=1, timeout=1, progress=print)
    assert "Kafka broker is not running" in caught.value.message and "local up" in caught.value.hint


def test_the_url_a_member_listens_on_is_read_from_its_latest_launch(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    record = state.ProcessRecord(name="node-1", role=stack.AGENT, pid=1, marker="m", log=str(log))
    assert stack.listening_url(record) is None  # no log yet

    def launch(*lines: dict) -> None:
        with log.open("a") as out:
            out.write("\n=== 2026-01-01T00:00:00 python -m myolo.agent run --config agent.toml --log-json\n")
            out.writelines(json.dumps(line) + "\n" for line in lines)

    launch({"event": "health endpoint listening", "url": "http://127.0.0.1:41001/healthz"})
    assert stack.listening_url(record) == "http://127.0.0.1:41001"
    launch({"event": "starting"})  # a later launch: the earlier one's port is no longer anyone's
    assert stack.listening_url(record) is None
    with log.open("a") as out:
        out.write('{"event": "health endpoint listening", "url": "http://127.0.0.1:41002/healthz"}\n{"half": ')
    assert stack.listening_url(record) == "http://127.0.0.1:41002"
    coordinator = state.ProcessRecord(name="coordinator-1", role=stack.COORDINATOR, pid=2, marker="m", log=str(log))
    assert stack.listening_url(coordinator) is None  # another role's event
