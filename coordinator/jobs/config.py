"""The ``[jobs]`` section: how the leader schedules elastic jobs."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from myolo.common.errors import ConfigError

Seconds = Annotated[float, msgspec.Meta(ge=0, le=86_400)]
Port = Annotated[int, msgspec.Meta(ge=1024, le=65535)]


class JobsConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Each generation's rendezvous port is taken from ``[port_min, port_max]`` by job and generation; the
    master address is the address its rank-0 node advertises (``default_address`` when it gives none).

    A job grows when capacity appears, at most once per ``grow_cooldown_s``; a failed generation is
    restarted after ``restart_backoff_s`` doubling per restart up to ``max_backoff_s``; a node on which the
    same job's workers failed ``cordon_after_failures`` times in a row is cordoned with the reason. A generation
    that trained ``healthy_after_s`` from its first step ends the row: its nodes' failure counts and the
    back-off start again from zero (the restart budget, ``maxRestarts``, does not).
    A node whose agent refused a start (draining, GPUs taken) or did not answer is left out of the job's
    placements for ``avoid_s``, without spending its restart budget. Stopping a generation waits at most ``stop_timeout_s`` for the agents' answers (a node that went Lost
    never answers)."""

    port_min: Port = 29500
    port_max: Port = 30499
    default_address: Annotated[str, msgspec.Meta(min_length=1, max_length=253)] = "127.0.0.1"
    grow_cooldown_s: Seconds = 30.0
    restart_backoff_s: Seconds = 1.0
    max_backoff_s: Seconds = 60.0
    cordon_after_failures: Annotated[int, msgspec.Meta(ge=0, le=100)] = 3  # 0: never
    healthy_after_s: Seconds = 120.0
    stop_timeout_s: Seconds = 180.0
    start_timeout_s: Seconds = 120.0  # from the start commands to every agent's answer
    avoid_s: Seconds = 60.0
    # after a worker fault, how long members may take to show a sign of life (a sample, their own fault)
    # before the silent ones are left out of the next generation
    fault_settle_s: Seconds = 2.0
    # a running generation's member whose samples show none of its workers this long has lost them (the fault
    # event may have been lost, e.g. while leadership moved): the generation is restarted
    workers_missing_s: Seconds = (
        15.0  # a node that refused a start (or did not answer) is left out of placements this long
    )
    straggler_factor: Annotated[float, msgspec.Meta(ge=1.0, le=100.0)] = 2.0
    straggler_window_s: Seconds = 60.0
    max_jobs: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1000


def check(cfg: JobsConfig, core: Any) -> None:
    if cfg.port_max < cfg.port_min:
        raise ConfigError("jobs.port_max", f"must be >= jobs.port_min ({cfg.port_min})")
    if cfg.max_backoff_s < cfg.restart_backoff_s:
        raise ConfigError("jobs.max_backoff_s", f"must be >= jobs.restart_backoff_s ({cfg.restart_backoff_s})")
