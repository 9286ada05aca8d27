"""The spool's counters, as the health endpoint, the status line and the loss fault read them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpoolStats:
    """``dropped`` counts every record lost, whatever the reason; ``over_cap``, ``failed_writes`` and
    ``corrupt_frames`` say which reason (they add up to ``dropped``). ``torn_tails`` are writes a crash cut
    short (cut off on start); ``cursor_resets`` are cursors not trusted (records sent again, none lost);
    ``cursor_error`` says why the cursor cannot be written now."""

    pending_records: int
    bytes: int
    max_bytes: int
    segments: int
    appended: int
    committed: int
    dropped: int
    last_seq: int
    acked_seq: int
    over_cap: int = 0
    corrupt_frames: int = 0
    failed_writes: int = 0
    torn_tails: int = 0
    cursor_resets: int = 0
    cursor_error: str | None = None

    def summary(self) -> str:
        """The spool's part of the agent's one-line status (``myolo-agent status``, systemd's STATUS=)."""
        line = f"{self.pending_records} pending, {self.dropped} dropped"
        return f"{line} ({self.why_dropped()})" if self.dropped else line

    def why_dropped(self) -> str:
        """``"2 over cap, 1 corrupt"``: the reasons behind ``dropped``."""
        return ", ".join(f"{n} {what}" for what, n in self._reasons() if n)

    def losses(self) -> dict[str, int]:
        """The loss counters by name (what a loss fault reports)."""
        return {"over_cap": self.over_cap, "corrupt_frames": self.corrupt_frames, "failed_writes": self.failed_writes}

    def _reasons(self) -> tuple[tuple[str, int], ...]:
        return (("over cap", self.over_cap), ("corrupt", self.corrupt_frames), ("failed writes", self.failed_writes))
