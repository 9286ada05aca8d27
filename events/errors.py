"""Errors of the event contract: each names the field at fault and says why, in words a person can act on."""

from __future__ import annotations


class InvalidEvent(Exception):
    """A record that cannot be accepted. ``field`` is where the problem is (``data.gpus[0].util_gpu``,
    ``header ce_type``, ``value``); ``reason`` is a short, human-readable cause. Consumers dead-letter it."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        self.reason = reason
        self.field = field
        super().__init__(f"{field}: {reason}" if field else reason)


class SignatureError(InvalidEvent):
    """A command whose signature is missing, made with an unknown key, or does not verify."""
