"""The coordinator's configuration: ``/etc/myolo/coordinator.toml`` plus ``MYOLO_*`` overrides.

The file has the core's keys (identity, ticks, API, signing, leadership, Kafka) and one section per component
(``[fleet]``, ``[cordons]``, ``[commands]``, ...), each validated by the Struct the component declares; the
schema is assembled from the component list, so a new component brings its section without editing this file.
Loaded with :func:`events.config.load_config`, so ``fleet.lost_after_s`` is also ``MYOLO_FLEET_LOST_AFTER_S``
and ``api.port`` is ``MYOLO_API_PORT``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from coordinator.api.settings import check_api
from events.config import load_config
from events.errors import ConfigError
from events.keys import Ed25519Signer, HmacKey, load_signer
from events.settings import KafkaSettings

if TYPE_CHECKING:
    from coordinator.core.component import Component

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


class SigningConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The coordinators' key: an Ed25519 private key (agents verify commands with its ``.pub``) or a legacy
    HMAC secret (agents hold the same file). State records are signed with a key derived from it."""

    key_file: str = ""
    # keys used before a rotation (files, as key_file): state records they sealed are still read, and a new
    # leader seals them again with key_file (logged); see docs/security-signing.md for when to drop them
    previous_key_files: list[str] = []


def previous_signers(signing: SigningConfig) -> list[Ed25519Signer | HmacKey]:
    return [load_signer(p, f"signing.previous_key_files[{i}]") for i, p in enumerate(signing.previous_key_files)]


class LeaderConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Leadership by group membership. A dead leader is noticed after ``session_timeout_ms`` (Kafka's
    ``group.min.session.timeout.ms`` is 6000 by default, so that is also our floor)."""

    group_id: str = "myolo-coordinator-leader"
    session_timeout_ms: Annotated[int, msgspec.Meta(ge=1000)] = 6000
    heartbeat_interval_ms: Annotated[int, msgspec.Meta(ge=100)] = 1000


class CoreConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The core's keys of ``coordinator.toml``. See ``systemd/coordinator.toml`` for a commented example."""

    instance_id: str = ""  # default: the host name; must differ between coordinators
    tick_s: Positive = 0.5
    # where a coordinator that has never run starts reading events: "latest" (samples repeat every second,
    # so nothing is lost that matters) or "earliest" (replays the retained history first)
    ingest_from: Literal["latest", "earliest"] = "latest"
    status_file: str = ""  # if set, a JSON snapshot of leadership and every component, rewritten every tick
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    api: ApiConfig = msgspec.field(default_factory=ApiConfig)
    signing: SigningConfig = msgspec.field(default_factory=SigningConfig)
    leader: LeaderConfig = msgspec.field(default_factory=LeaderConfig)
    kafka: KafkaSettings = msgspec.field(default_factory=KafkaSettings)


def schema(components: Sequence[type[Component]]) -> type[CoreConfig]:
    """The whole file's Struct: the core's keys plus one section per component that declares a config."""
    return _schema(tuple(components))


@cache
def _schema(components: tuple[type[Component], ...]) -> type[CoreConfig]:
    from coordinator.core.assembly import check_names

    check_names(components)  # one section per name
    fields: list[tuple[str, Any, Any]] = []
    for comp in components:
        if comp.config is not None:
            fields.append((comp.name, comp.config, msgspec.field(default_factory=comp.config)))
    return msgspec.defstruct(
        "CoordinatorConfig", fields, bases=(CoreConfig,), kw_only=True, forbid_unknown_fields=True, module=__name__
    )


def section(cfg: CoreConfig, name: str) -> Any:
    """A component's section of an assembled config."""
    return getattr(cfg, name)


def default_config(components: Sequence[type[Component]] | None = None, **core: Any) -> CoreConfig:
    """An assembled config with every default (tests and benchmarks set what they need by keyword)."""
    from coordinator.components import COMPONENTS

    return schema(components or COMPONENTS)(**core)


def load_coordinator_config(
    path: str | Path | None = None,
    *,
    env: dict[str, str] | None = None,
    api_port: int | None = None,
    components: Sequence[type[Component]] | None = None,
) -> CoreConfig:
    """Read, override from the environment and the command line, check. Raises :class:`ConfigError`."""
    from coordinator.components import COMPONENTS

    comps = tuple(components or COMPONENTS)
    cfg = load_config(path, schema(comps), env=env)
    if api_port is not None:
        if not 0 <= api_port <= 65535:
            raise ConfigError("api.port", f"--api-port must be between 0 and 65535, got {api_port}")
        cfg.api.port = api_port
    if not cfg.instance_id:
        cfg.instance_id = socket.gethostname().split(".")[0]
    check_core(cfg)
    for comp in comps:
        comp.check_config(section(cfg, comp.name) if comp.config else None, cfg)
    return cfg


def check_core(cfg: CoreConfig) -> None:
    if not cfg.signing.key_file:
        raise ConfigError(
            "signing.key_file",
            "required: commands to agents and state records are signed with it; generate one with "
            "`myoloctl keys generate /etc/myolo/coordinator.key` (agents get coordinator.key.pub)",
        )
    if not os.path.isfile(cfg.signing.key_file):
        raise ConfigError("signing.key_file", f"file {cfg.signing.key_file!r} does not exist")
    load_signer(cfg.signing.key_file)  # unreadable, readable by others or not a key: fail the start now
    previous_signers(cfg.signing)
    if cfg.leader.heartbeat_interval_ms * 3 > cfg.leader.session_timeout_ms:
        raise ConfigError(
            "leader.heartbeat_interval_ms",
            f"must be at most a third of leader.session_timeout_ms ({cfg.leader.session_timeout_ms}), "
            "so a live leader never misses its session",
        )
    check_api(cfg.api)
