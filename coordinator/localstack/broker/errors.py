"""The one exception the local broker raises at a user."""

from __future__ import annotations


class BrokerError(RuntimeError):
    """A local-broker failure a person can act on.

    `str(err)` says what went wrong; `hint` says what to do about it; `detail` carries evidence (the tail
    of a log, Maven's last lines) that the CLI prints under the message. Keeping the three apart lets the
    CLI format them and lets tests assert on the hint without parsing prose.
    """

    def __init__(self, message: str, hint: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail

    def render(self) -> str:
        """Message, hint and detail as plain text (for logs and non-rich callers)."""
        parts = [self.message, f"hint: {self.hint}"]
        if self.detail:
            parts.append(self.detail)
        return "\n".join(parts)
