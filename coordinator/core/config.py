"""The core's keys of ``coordinator.toml``: identity, ticks, API, signing, leadership, Kafka.

A leaf module: the whole file's schema (these keys plus one section per component) is assembled in
``coordinator/config.py`` from the component list it is given.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from myolo.common.keys import Ed25519Signer, HmacKey, load_signer
from myolo.coordinator.api.config import ApiConfig, Positive
from myolo.events.settings import KafkaSettings


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


def section(cfg: CoreConfig, name: str) -> Any:
    """A component's section of an assembled config."""
    return getattr(cfg, name)
