"""What ``GET /v1/commands`` answers: the remembered commands, each with what became of it."""

from __future__ import annotations

import msgspec

from myolo.coordinator.commands.records import CommandIntent


class IntentList(msgspec.Struct, kw_only=True):
    items: list[CommandIntent]
