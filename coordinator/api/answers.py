"""The core API's answers: an error, the leader. ``myoloctl`` decodes the same Structs."""

from __future__ import annotations

import msgspec


class ErrorAnswer(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Every error answer: what went wrong, the field at fault and how to fix it, when known."""

    error: str
    field: str | None = None
    hint: str | None = None


class LeaderAnswer(msgspec.Struct, kw_only=True):
    """``GET /v1/leader``: the leader (or the last one recorded; all None before any term) and whether that is
    the coordinator that answered."""

    leader_id: str | None
    epoch: int | None
    api_url: str | None
    instance_id: str
    is_leader: bool
