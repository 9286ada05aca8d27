"""The ``[api]`` security keys at start: authentication on by default, ``auth = "none"`` only on loopback, TLS
files checked (the key 0600), each refusal naming the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from myolo.common.errors import ConfigError
from myolo.coordinator.api.security import server_ssl
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.config import load_coordinator_config
from tests.support.api_auth import shared, write_tokens
from tests.support.helpers import write_key
from tests.support.tls_certs import make_certs


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"MYOLO_SIGNING_KEY_FILE": str(write_key(tmp_path / "k", "00" * 32)), "MYOLO_INSTANCE_ID": "c1"}


def refusal(env: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as exc:
        load_coordinator_config(None, components=COMPONENTS, env=env)
    return exc.value


def test_without_a_tokens_file_the_coordinator_does_not_start(env) -> None:
    err = refusal(env)
    assert err.key == "api.tokens_file"
    assert "myoloctl token create admin --role admin" in err.reason and 'api.auth = "none"' in err.reason
    missing = refusal({**env, "MYOLO_API_TOKENS_FILE": "/nonexistent/tokens"})
    assert missing.key == "api.tokens_file" and "cannot read" in missing.reason
    assert (
        load_coordinator_config(None, components=COMPONENTS, env={**env, "MYOLO_API_ENABLED": "false"}).api.enabled
        is False
    )


def test_a_tokens_file_others_may_write_or_without_tokens_is_refused(env, tmp_path: Path) -> None:
    path = tmp_path / "api-tokens"
    write_tokens(path, {"alice": "admin"})
    path.chmod(0o662)
    assert "chmod 600" in refusal({**env, "MYOLO_API_TOKENS_FILE": str(path)}).reason
    path.write_text("# nobody yet\n")
    path.chmod(0o600)
    assert "holds no token" in refusal({**env, "MYOLO_API_TOKENS_FILE": str(path)}).reason


@pytest.mark.parametrize(
    ("host", "ok"), [("127.0.0.1", True), ("::1", True), ("localhost", True), ("0.0.0.0", False), ("10.0.0.5", False)]
)
def test_auth_none_only_on_loopback(env, host: str, ok: bool) -> None:
    open_env = {**env, "MYOLO_API_AUTH": "none", "MYOLO_API_HOST": host}
    if ok:
        assert load_coordinator_config(None, components=COMPONENTS, env=open_env).api.auth == "none"
        return
    err = refusal(open_env)
    assert err.key == "api.auth" and "loopback" in err.reason and "api.tokens_file" in err.reason


def test_auth_none_with_a_tokens_file_is_a_contradiction(env) -> None:
    err = refusal({**env, "MYOLO_API_AUTH": "none", "MYOLO_API_TOKENS_FILE": str(shared()[0])})
    assert err.key == "api.tokens_file" and "ignore" in err.reason


def test_tls_needs_both_files_a_private_key_and_https_urls(env, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "tls")
    base = {**env, "MYOLO_API_TOKENS_FILE": str(shared()[0])}
    assert refusal({**base, "MYOLO_API_TLS_CERT_FILE": str(certs.cert)}).key == "api.tls_key_file"
    both = {**base, "MYOLO_API_TLS_CERT_FILE": str(certs.cert), "MYOLO_API_TLS_KEY_FILE": str(certs.key)}
    cfg = load_coordinator_config(None, components=COMPONENTS, env=both)
    assert cfg.api.url() == "https://127.0.0.1:8480" and server_ssl(cfg.api) is not None
    assert refusal({**both, "MYOLO_API_ADVERTISE_URL": "http://c1:8480"}).key == "api.advertise_url"
    certs.key.chmod(0o644)
    loose = refusal(both)
    assert loose.key == "api.tls_key_file" and f"chmod 600 {certs.key}" in loose.reason
    certs.key.chmod(0o600)
    wrong = {**both, "MYOLO_API_TLS_CERT_FILE": str(certs.ca)}  # not the key's certificate
    assert refusal(wrong).key == "api.tls_cert_file"
