"""The ``[api]`` section's security keys, checked at start: tokens file, ``auth = "none"``, TLS.

Authentication is on by default: a coordinator whose API is enabled starts only with a tokens file it can use,
or with ``auth = "none"`` set explicitly on a loopback host (a developer's machine). TLS is optional; its key
file must be readable by its owner only, like any private key.
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from myolo.common.clock import Clock
from myolo.common.errors import ConfigError
from myolo.common.keys import check_private
from myolo.coordinator.api.audit import AuditLog, Send
from myolo.coordinator.api.auth import Authenticator
from myolo.coordinator.api.gate import Security
from myolo.coordinator.api.tokens import FIELD, TokenStore

if TYPE_CHECKING:
    from myolo.coordinator.api.config import ApiConfig

log = structlog.get_logger("myolo.coordinator.api")
CREATE = "myoloctl token create admin --role admin --tokens-file /etc/myolo/api-tokens"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_api(api: ApiConfig) -> None:
    """Raise ConfigError naming the key and the fix; nothing to check when the API is off."""
    if not api.enabled:
        return
    if api.auth == "none":
        if not is_loopback(api.host):
            raise ConfigError(
                "api.auth",
                f'"none" makes every caller an admin, so it is only allowed with api.host on loopback '
                f"(127.0.0.1, ::1), not {api.host!r}; set api.tokens_file ({CREATE}) instead",
            )
        if api.tokens_file:
            raise ConfigError("api.tokens_file", 'is set, but api.auth = "none" would ignore it: remove one of them')
    else:
        tokens(api)
    if bool(api.tls_cert_file) != bool(api.tls_key_file):
        missing = "api.tls_key_file" if api.tls_cert_file else "api.tls_cert_file"
        raise ConfigError(missing, "TLS needs both api.tls_cert_file and api.tls_key_file (or neither)")
    if api.tls_cert_file:
        server_ssl(api)
        if api.advertise_url.startswith("http://"):
            raise ConfigError("api.advertise_url", "the API serves HTTPS (api.tls_cert_file): advertise https://...")


def tokens(api: ApiConfig) -> TokenStore:
    if not api.tokens_file:
        raise ConfigError(
            FIELD,
            "required: the API authenticates every caller by a bearer token whose hash is in this file. "
            f'Create it with `{CREATE}`; or, for a loopback-only test setup, set api.auth = "none"',
        )
    store = TokenStore(api.tokens_file)
    if not store.entries():
        raise ConfigError(FIELD, f"{api.tokens_file!r} holds no token, so nobody could call the API: `{CREATE}`")
    return store


def server_ssl(api: ApiConfig) -> ssl.SSLContext | None:
    """The server's TLS context (TLS 1.2 or newer), or None without TLS; ConfigError naming the bad file."""
    if not api.tls_cert_file:
        return None
    check_private(Path(api.tls_key_file), "api.tls_key_file")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(api.tls_cert_file, api.tls_key_file)
    except FileNotFoundError as exc:
        raise ConfigError("api.tls_cert_file", f"{exc.filename!r} does not exist") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            "api.tls_cert_file", f"cannot load {api.tls_cert_file!r} with {api.tls_key_file!r}: {exc}"
        ) from None
    return ctx


def security_for(api: ApiConfig, send: Send, clock: Clock, instance_id: str) -> Security:
    """The gate of one coordinator's API: its tokens (or nobody checked, where allowed) and its audit log."""
    if api.auth == "none":
        log.warning("the API runs without authentication: every caller is admin", host=api.host)
    store = tokens(api) if api.auth != "none" else None
    return Security(Authenticator(store), AuditLog(send, clock, instance_id, api.audit_timeout_s))
