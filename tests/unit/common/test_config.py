"""Config files and MYOLO_* overrides land in the schema; every mistake names its key and origin."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from myolo.common.config import env_names, load_config
from myolo.common.errors import ConfigError
from myolo.events.settings import KafkaSettings


class Schema(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    kafka: KafkaSettings = msgspec.field(default_factory=KafkaSettings)
    sample_interval_s: float = 1.0
    node_id: str = ""


def test_env_names_follow_the_schema() -> None:
    names = env_names(Schema)
    assert names["MYOLO_KAFKA_BOOTSTRAP"] == ("kafka", "bootstrap")
    assert names["MYOLO_SAMPLE_INTERVAL_S"] == ("sample_interval_s",)


def test_file_then_env(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('node_id = "n7"\nsample_interval_s = 5\n[kafka]\nbootstrap = "file:9092"\n')
    cfg = load_config(path, Schema, env={"MYOLO_KAFKA_BOOTSTRAP": "env:9092"})
    assert (cfg.node_id, cfg.sample_interval_s, cfg.kafka.bootstrap) == ("n7", 5.0, "env:9092")


@pytest.mark.parametrize(
    ("text", "env", "key", "origin"),
    [
        ("[kafka]\nbootstrapp = 'x'\n", {}, "kafka.bootstrapp", "c.toml"),
        ("sample_interval_s = 'fast'\n", {}, "sample_interval_s", "c.toml"),
        ("", {"MYOLO_SAMPLE_INTERVAL_S": "fast"}, "sample_interval_s", "MYOLO_SAMPLE_INTERVAL_S"),
        ("", {"MYOLO_KAFKA_SECURITY_PROTOCOL": "TLS"}, "kafka.security_protocol", "MYOLO_KAFKA_SECURITY_PROTOCOL"),
    ],
)
def test_errors_name_key_and_origin(tmp_path: Path, text: str, env: dict, key: str, origin: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, Schema, env=env)
    assert info.value.key == key
    assert origin in str(info.value)


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", Schema, env={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[kafka\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad, Schema, env={})


def test_security_settings_become_client_arguments(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not really a cert")
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    settings = KafkaSettings(
        bootstrap="k:9093", security_protocol="SASL_PLAINTEXT", sasl_username="agent", sasl_password_file=str(pw)
    )
    kw = settings.client_kwargs()
    assert kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("agent", "s3cret")
    with pytest.raises(ConfigError) as info:
        KafkaSettings(
            bootstrap="k:9093",
            security_protocol="SASL_SSL",
            sasl_username="a",
            sasl_password="p",
            ssl_ca_file=str(tmp_path / "missing.pem"),
        ).client_kwargs()
    assert info.value.key == "kafka.ssl_ca_file"
    with pytest.raises(ConfigError) as info:
        KafkaSettings(bootstrap="k:9093", security_protocol="SASL_SSL").client_kwargs()
    assert info.value.key == "kafka.sasl_username"
