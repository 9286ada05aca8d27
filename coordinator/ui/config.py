"""The ``[ui]`` section: the dashboard's sessions, its rings of recent samples and its live feed."""

from __future__ import annotations

from typing import Annotated

import msgspec

Positive = Annotated[float, msgspec.Meta(gt=0)]
Count = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]


class UiConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Sessions last ``session_ttl_s`` (coordinator clock), at most ``max_sessions`` at once (the oldest goes
    first). Per node the last ``history_s`` of GPU samples are kept, one every ``history_step_s``; per job its
    last ``job_points`` progress points. At most ``max_streams`` browsers follow the live feed, each told what
    changed at most once per ``coalesce_s``."""

    enabled: bool = True
    session_ttl_s: Positive = 8 * 3600.0
    max_sessions: Count = 1000
    history_s: Positive = 3600.0
    history_step_s: Positive = 30.0
    max_nodes: Count = 10_000
    job_points: Count = 2000
    max_jobs: Count = 1000
    max_streams: Count = 64
    coalesce_s: Positive = 1.0
    keepalive_s: Positive = 15.0
    timeline_limit: Count = 500
