"""The coordinator's configuration: ``/etc/myolo/coordinator.toml`` plus ``MYOLO_*`` overrides.

Loaded with :func:`events.config.load_config`, so ``lost_after_s`` is also ``MYOLO_LOST_AFTER_S`` and
``api.port`` is ``MYOLO_API_PORT``. Everything time-related is configurable, because a fleet on a slow network
and a test on a laptop need different numbers; the defaults detect a dead node in seconds.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from events.config import load_config
from events.errors import ConfigError
from events.settings import KafkaSettings

Positive = Annotated[float, msgspec.Meta(gt=0)]
Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]


class ApiConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The HTTP API. ``advertise_url`` is what other coordinators redirect writes to (default from host/port)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: Port = 8480
    advertise_url: str = ""

    def url(self) -> str:
        if self.advertise_url:
            return self.advertise_url.rstrip("/")
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}"


class SigningConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The key commands are signed with; agents verify with the same key file."""

    key_file: str = ""


class LeaderConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Leadership by group membership. A dead leader is noticed after ``session_timeout_ms`` (Kafka's
    ``group.min.session.timeout.ms`` is 6000 by default, so that is also our floor)."""

    group_id: str = "myolo-coordinator-leader"
    session_timeout_ms: Annotated[int, msgspec.Meta(ge=1000)] = 6000
    heartbeat_interval_ms: Annotated[int, msgspec.Meta(ge=100)] = 1000


class CommandsConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Unacknowledged commands are sent again with the same command id every ``retry_after_s``."""

    retry_after_s: Positive = 5.0
    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=100)] = 5
    request_sample_on_suspect: bool = True


class CoordinatorConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The ``coordinator.toml`` file. See ``systemd/coordinator.toml`` for a commented example."""

    instance_id: str = ""  # default: the host name; must differ between coordinators
    lost_after_s: Positive = 10.0
    suspect_after_intervals: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 3
    act_on_warn: bool = False
    tick_s: Positive = 0.5
    # where a coordinator that has never run starts reading samples: "latest" (samples repeat every second,
    # so nothing is lost that matters) or "earliest" (replays the retained history first)
    ingest_from: Literal["latest", "earliest"] = "latest"
    status_file: str = ""  # if set, a JSON snapshot of leadership and the fleet view, rewritten every tick
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    api: ApiConfig = msgspec.field(default_factory=ApiConfig)
    signing: SigningConfig = msgspec.field(default_factory=SigningConfig)
    leader: LeaderConfig = msgspec.field(default_factory=LeaderConfig)
    commands: CommandsConfig = msgspec.field(default_factory=CommandsConfig)
    kafka: KafkaSettings = msgspec.field(default_factory=KafkaSettings)


def load_coordinator_config(
    path: str | Path | None = None, *, env: dict[str, str] | None = None, api_port: int | None = None
) -> CoordinatorConfig:
    """Read, override from the environment and the command line, check. Raises :class:`ConfigError`."""
    cfg = load_config(path, CoordinatorConfig, env=env)
    if api_port is not None:
        if not 0 <= api_port <= 65535:
            raise ConfigError("api.port", f"--api-port must be between 0 and 65535, got {api_port}")
        cfg.api.port = api_port
    if not cfg.instance_id:
        cfg.instance_id = socket.gethostname().split(".")[0]
    if not cfg.signing.key_file:
        raise ConfigError(
            "signing.key_file",
            "required: commands to agents are signed; point it at the key file agents verify with "
            "(generate one with `head -c 32 /dev/urandom | xxd -p -c 64 > coordinator.key`)",
        )
    if not os.path.isfile(cfg.signing.key_file):
        raise ConfigError("signing.key_file", f"file {cfg.signing.key_file!r} does not exist")
    if cfg.commands.retry_after_s < cfg.tick_s:
        raise ConfigError("commands.retry_after_s", f"must be >= tick_s ({cfg.tick_s}); retries are checked each tick")
    if cfg.leader.heartbeat_interval_ms * 3 > cfg.leader.session_timeout_ms:
        raise ConfigError(
            "leader.heartbeat_interval_ms",
            f"must be at most a third of leader.session_timeout_ms ({cfg.leader.session_timeout_ms}), "
            "so a live leader never misses its session",
        )
    return cfg
