"""The ``[preflight]`` section: how long a pre-flight waits for the agents, and what one node may be asked to read."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from myolo.common.errors import ConfigError

MAX_TIMEOUT_S = 900.0


class PreflightConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``timeout_s`` is the default wait for every node's answers (a request may ask for another, up to
    ``MAX_TIMEOUT_S``); ``hash_max_bytes`` bounds what one node reads for the data check (a file larger than
    what is left is reported, not read); ``probe_timeout_s`` bounds the bandwidth probe on the node."""

    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT_S)] = 120.0
    hash_max_bytes: Annotated[int, msgspec.Meta(ge=1, le=1 << 44)] = 1 << 40
    probe_timeout_s: Annotated[float, msgspec.Meta(ge=1, le=3600)] = 300.0
    poll_s: Annotated[float, msgspec.Meta(gt=0, le=10)] = 0.25  # how often the answers are looked at


def check(cfg: PreflightConfig, core: Any) -> None:
    if cfg.poll_s >= cfg.timeout_s:
        raise ConfigError(
            "preflight.poll_s",
            f"must be below preflight.timeout_s ({cfg.timeout_s}): it is how often the answers are read while waiting",
        )
