"""SIGHUP: read the configuration again and apply what can change without a restart.

Live: the sample interval, log level, publish batching and back-off, leak threshold and report interval, NCCL
log globs, the spool's "degraded" share, the probe schedule, the trainer's timeouts, interpreter and progress
interval (running jobs included: restarting the agent would stop their workers). Identity (node id, address),
paths, the GPU backend, Kafka settings, the commands section, ``trainer.enabled`` and the health listener need
a restart; a change to them is logged (and ignored) so an operator knows. A file that does not load keeps the
running configuration and logs why.
"""

from __future__ import annotations

import logging

import msgspec
import structlog

from myolo.agent.config import AgentConfig, load_agent_config
from myolo.agent.daemon.runtime import Runtime
from myolo.agent.daemon.trainer import trainer_python
from myolo.common.errors import ConfigError

log = structlog.get_logger("myolo.agent.daemon")
RESTART_ONLY = ("node_id", "address", "simulate_gpus", "data_dir", "control_socket", "spool", "kafka", "commands")


def reload_config(rt: Runtime) -> bool:
    """Returns True when a new configuration was applied."""
    old = rt.cfg
    try:
        new = load_agent_config(rt.config_path, simulate_gpus=old.simulate_gpus or None)
    except ConfigError as exc:
        log.error("SIGHUP: configuration not reloaded, keeping the running one", error=str(exc))
        return False
    kept = [name for name in RESTART_ONLY if getattr(new, name) != getattr(old, name)]
    if new.trainer.enabled != old.trainer.enabled:
        kept.append("trainer.enabled")
        new = msgspec.structs.replace(new, trainer=msgspec.structs.replace(new.trainer, enabled=old.trainer.enabled))
    if (
        new.health.host != old.health.host
        or new.health.port != old.health.port
        or new.health.enabled != old.health.enabled
    ):
        kept.append("health.host/port/enabled")
    if kept:
        log.warning("SIGHUP: changed keys take effect only after a restart", keys=kept)
    merged = msgspec.structs.replace(
        new,
        **{name: getattr(old, name) for name in RESTART_ONLY},
        health=msgspec.structs.replace(
            new.health, host=old.health.host, port=old.health.port, enabled=old.health.enabled
        ),
    )
    apply(rt, merged)
    log.info("SIGHUP: configuration reloaded", source=rt.config_path or "defaults and environment")
    return True


def apply(rt: Runtime, cfg: AgentConfig) -> None:
    rt.cfg = cfg
    rt.publisher.cfg = cfg.publish
    if rt.trainer is not None:
        rt.trainer.reconfigure(cfg.trainer, trainer_python(rt))
    logging.getLogger().setLevel(cfg.log_level.upper())
