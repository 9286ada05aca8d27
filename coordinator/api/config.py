"""The ``[api]`` section of ``coordinator.toml``: where the HTTP API listens, how callers authenticate."""

from __future__ import annotations

import socket
from typing import Annotated, Literal

import msgspec

Positive = Annotated[float, msgspec.Meta(gt=0)]
Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]


class ApiConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The HTTP API. ``advertise_url`` is what other coordinators redirect writes to (default from host/port).
    Callers present bearer tokens whose hashes are in ``tokens_file`` (``auth = "none"``: nobody is asked, only on
    a loopback host); TLS with ``tls_cert_file`` and ``tls_key_file``. See docs/security-api.md."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: Port = 8480
    advertise_url: str = ""
    auth: Literal["tokens", "none"] = "tokens"
    tokens_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    audit_timeout_s: Positive = 5.0  # a write waits this long for Kafka to take its audit record, else 503

    def url(self) -> str:
        if self.advertise_url:
            return self.advertise_url.rstrip("/")
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        return f"{'https' if self.tls_cert_file else 'http'}://{host}:{self.port}"
