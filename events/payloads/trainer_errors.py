"""The error of a trainer job field: what every section, the trainer and both command lines raise."""

from __future__ import annotations

from myolo.events.payloads.trainer_flags import flag


class TrainerJobError(ValueError):
    """A job field (or a combination) the trainer would refuse. ``field`` is the dotted field at fault
    (``optimizer.warmup_steps``; for a combination, the one the message puts first; None when no field is, as
    for a job file that does not parse); the message names it, its flag, and what to change."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.reason = message

    @classmethod
    def at(cls, field: str, reason: str) -> TrainerJobError:
        """``optimizer.warmup_steps (--warmup-steps): <reason>``; ``reason`` without the field stays on it."""
        err = cls(f"{field} ({flag(field)}): {reason}", field)
        err.reason = reason
        return err
