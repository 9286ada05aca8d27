"""The ``[rollouts]`` section: the default plan of a rollout (its waves, bake time, gates and timeouts)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from myolo.common.errors import ConfigError

Seconds = Annotated[float, msgspec.Meta(ge=0, le=90 * 86_400)]
Percent = Annotated[float, msgspec.Meta(gt=0, le=100)]


class Plan(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """How a rollout moves: ``waves`` are cumulative shares of the nodes (5 -> 20 -> 50 -> 100 %; each wave
    gets at least one node), each wave baked ``bake_s`` (seconds in tests, days in production, e.g.
    7 days) and then judged by the gates over its bake window: no FAIL fault or health on its
    nodes, no memory leak of ``leak_pct_per_h`` or more (a leak report whose lower bound is above 0), and the
    per-replica throughput of the jobs that ran on its nodes within ``throughput_tolerance`` of what they did
    before the wave (``baseline_s`` before it); a job the wave displaced is judged from its first step on the
    layout it took after the upgrade, not through its restart (``coordinator/rollouts/bake.py``), and one not
    back within ``upgrade_timeout_s`` on what it reported. A wave whose nodes do not drain within
    ``drain_timeout_s`` is upgraded anyway (their jobs were told to leave); one not back healthy on the new
    version within ``upgrade_timeout_s`` fails its health gate."""

    waves: Annotated[list[Percent], msgspec.Meta(min_length=1, max_length=20)] = msgspec.field(
        default_factory=lambda: [5.0, 20.0, 50.0, 100.0]
    )
    bake_s: Seconds = 3600.0
    leak_pct_per_h: Annotated[float, msgspec.Meta(gt=0, le=100)] = 0.1
    throughput_tolerance: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.03
    baseline_s: Seconds = 600.0
    drain_timeout_s: Seconds = 600.0
    upgrade_timeout_s: Seconds = 600.0

    def __post_init__(self) -> None:
        if any(b <= a for a, b in zip(self.waves, self.waves[1:], strict=False)):
            raise ValueError(f"waves: {self.waves} must grow (cumulative shares of the nodes, e.g. 5, 20, 50, 100)")
        if self.waves[-1] != 100:
            raise ValueError(f"waves: the last wave must be 100 (got {self.waves[-1]}): a rollout covers every node")


class RolloutsConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``start_on_release``: an ``ai.myolo.release.published.v1`` of a component below (with its sha256)
    starts a rollout by itself; ``components`` maps a release's component name to what agents install."""

    plan: Plan = msgspec.field(default_factory=Plan)
    start_on_release: bool = True
    components: dict[str, str] = msgspec.field(
        default_factory=lambda: {
            "agent": "agent",
            "myolo-agent": "agent",
            "trainer": "trainer",
            "myolo-trainer": "trainer",
        }
    )
    max_rollouts: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1000


def check(cfg: RolloutsConfig, core: Any) -> None:
    bad = {k: v for k, v in cfg.components.items() if v not in ("agent", "trainer")}
    if bad:
        raise ConfigError("rollouts.components", f"{bad} maps to something agents do not install; use agent or trainer")
