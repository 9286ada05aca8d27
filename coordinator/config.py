"""The coordinator's configuration: ``/etc/myolo/coordinator.toml`` plus ``MYOLO_*`` overrides.

The file has the core's keys (``core/config.py``: identity, ticks, API, signing, leadership, Kafka) and one
section per component (``[fleet]``, ``[cordons]``, ``[commands]``, ...), each validated by the Struct the
component declares; the schema is assembled from the component list the caller passes (the daemon's, in
``coordinator/components.py``), so a new component brings its section without editing this file.
Loaded with :func:`myolo.common.config.load_config`, so ``fleet.lost_after_s`` is also ``MYOLO_FLEET_LOST_AFTER_S``
and ``api.port`` is ``MYOLO_API_PORT``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from myolo.common.config import load_config
from myolo.common.errors import ConfigError
from myolo.common.keys import load_signer
from myolo.coordinator.api.security import check_api
from myolo.coordinator.core.assembly import check_names
from myolo.coordinator.core.component import Component
from myolo.coordinator.core.config import CoreConfig, previous_signers, section


def schema(components: Sequence[type[Component]]) -> type[CoreConfig]:
    """The whole file's Struct: the core's keys plus one section per component that declares a config."""
    return _schema(tuple(components))


@cache
def _schema(components: tuple[type[Component], ...]) -> type[CoreConfig]:
    check_names(components)  # one section per name
    fields: list[tuple[str, Any, Any]] = []
    for comp in components:
        if comp.config is not None:
            fields.append((comp.name, comp.config, msgspec.field(default_factory=comp.config)))
    return msgspec.defstruct(
        "CoordinatorConfig", fields, bases=(CoreConfig,), kw_only=True, forbid_unknown_fields=True, module=__name__
    )


def default_config(components: Sequence[type[Component]], **core: Any) -> CoreConfig:
    """An assembled config with every default (tests and benchmarks set what they need by keyword)."""
    return schema(components)(**core)


def load_coordinator_config(
    path: str | Path | None,
    *,
    components: Sequence[type[Component]],
    env: dict[str, str] | None = None,
    api_port: int | None = None,
) -> CoreConfig:
    """Read, override from the environment and the command line, check. Raises :class:`ConfigError`."""
    comps = tuple(components)
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
