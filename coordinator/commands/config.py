"""The ``[commands]`` section: how unacknowledged commands are retried."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from myolo.common.errors import ConfigError


class DispatchConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Unacknowledged commands are sent again with the same command id every ``retry_after_s``, up to
    ``max_attempts`` times, then recorded as expired."""

    retry_after_s: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=100)] = 5
    # each send carries expires_at = now + this: an agent refuses it later, so a captured command cannot be
    # replayed once the agent's ledger has forgotten its id (allow for clock skew between the machines)
    expire_after_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 300.0


def check(cfg: DispatchConfig, core: Any) -> None:
    if cfg.retry_after_s < core.tick_s:
        raise ConfigError("commands.retry_after_s", f"must be >= tick_s ({core.tick_s}); retries are checked each tick")
    if cfg.expire_after_s < cfg.retry_after_s:
        raise ConfigError(
            "commands.expire_after_s",
            f"must be >= commands.retry_after_s ({cfg.retry_after_s}): a command must live until its retry",
        )
