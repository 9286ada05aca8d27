"""The one error of release handling: why a version cannot be installed or switched to, in words to act on."""

from __future__ import annotations


class ReleaseError(Exception):
    """An upgrade or rollback that cannot go on. ``field`` is the command argument at fault (``args.sha256``),
    or None when the node itself is (a full disk, pip failing)."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        self.reason = reason
        self.field = field
        super().__init__(reason)
