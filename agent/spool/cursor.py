"""The spool's cursor file: the highest sequence number Kafka acknowledged, with its own checksum.

A cursor that cannot be trusted must never make the spool delete records: reading answers None for a
damaged cursor and the spool then sends from its oldest record (consumers de-duplicate by event id).

The cursor is rewritten after every acknowledged batch, so it is written in place (one ``pwrite`` of 12
bytes, inside one disk sector) rather than replaced through a temporary file and a rename, the costliest
step of a commit (tests/benchmarks/spool.md); a write torn anyway fails the checksum and costs duplicates.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

_CURSOR = struct.Struct(">QI")  # acknowledged seq, crc32 of those 8 bytes
_LEGACY_SIZE = 8  # the format before the checksum: the seq alone


def encode(acked: int) -> bytes:
    seq = acked.to_bytes(8, "big")
    return seq + zlib.crc32(seq).to_bytes(4, "big")


def decode(raw: bytes) -> int | None:
    """The acknowledged seq, or None when ``raw`` is not a whole cursor with a matching checksum.

    An 8-byte cursor of an earlier agent is taken as it is; the spool still checks it against what is on
    disk before trusting it."""
    if len(raw) == _LEGACY_SIZE:
        return int.from_bytes(raw, "big")
    if len(raw) != _CURSOR.size:
        return None
    acked, crc = _CURSOR.unpack(raw)
    return acked if zlib.crc32(raw[:8]) == crc else None


def read(path: Path) -> tuple[int, str | None]:
    """``(acked, problem)``: 0 and no problem for a missing cursor (a new spool); 0 and the problem for a
    damaged one."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return 0, None
    except OSError as exc:
        return 0, f"cursor file unreadable: {exc.strerror or exc}"
    acked = decode(raw)
    if acked is None:
        return 0, f"cursor file of {len(raw)} bytes fails its checksum"
    return acked, None


class CursorFile:
    """The cursor, opened once and rewritten in place."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def write(self, acked: int) -> None:
        """Raises ``OSError`` as the system reports it (the spool reports it and tries again later)."""
        if self._fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.ftruncate(fd, _CURSOR.size)  # an earlier agent's 8 bytes, or a damaged file of any length
            except OSError:
                os.close(fd)
                raise
            self._fd = fd
        if os.pwrite(self._fd, encode(acked), 0) != _CURSOR.size:
            raise OSError(f"short write of the spool cursor {self.path}")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
