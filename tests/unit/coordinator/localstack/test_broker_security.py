"""The secured local broker's users and properties: no unauthenticated listener, keys 0600, one role a user."""

from __future__ import annotations

from pathlib import Path

import pytest

from myolo.coordinator.localstack.broker import security


def test_secured_properties_expose_no_unauthenticated_listener(tmp_path: Path) -> None:
    sec = security.create(tmp_path, use_tls=True)
    security.ensure_user(sec, "producer", "producer")
    security.ensure_user(sec, "node-1", "agent")
    props = security.broker_properties(sec, 9092, 9093)
    assert props["listener.security.protocol.map"] == "CLIENT:SASL_SSL,CONTROLLER:SASL_PLAINTEXT"
    assert props["super.users"] == "User:admin"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert "user_producer=" in props["listener.name.client.plain.sasl.jaas.config"]
    assert "user_node-1" not in props["listener.name.client.plain.sasl.jaas.config"]  # PLAIN: producers only
    assert oct(Path(sec.users["node-1"].password_file).stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ValueError, match="already exists with role 'agent'"):
        security.ensure_user(sec, "node-1", "coordinator")
    plain = security.create(tmp_path / "plain", use_tls=False)
    security.ensure_user(plain, "producer", "producer")
    assert "listener.name.client.plain.sasl.jaas.config" not in security.broker_properties(plain, 1, 2)
