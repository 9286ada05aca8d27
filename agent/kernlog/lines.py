"""Bytes read in any chunks to bounded lines: /dev/kmsg gives one record per read, a pipe gives what it has.

A line longer than ``max_bytes`` is cut there and the rest, up to its newline, is dropped (counted), so a
flood without newlines costs at most ``max_bytes`` of memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_LINE_BYTES = 8192


@dataclass
class LineSplitter:
    max_bytes: int = MAX_LINE_BYTES
    cut: int = 0  # lines cut short
    _buf: bytearray = field(default_factory=bytearray)
    _skipping: bool = False  # inside the tail of a line already cut

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes (without their newline)."""
        out: list[bytes] = []
        start = 0
        while start < len(chunk):
            nl = chunk.find(b"\n", start)
            end = len(chunk) if nl < 0 else nl
            if not self._skipping:
                room = self.max_bytes - len(self._buf)
                self._buf += chunk[start : start + min(room, end - start)]
                if end - start > room:
                    out.append(bytes(self._buf))
                    self._buf.clear()
                    self.cut += 1
                    self._skipping = True
            if nl < 0:
                break
            if self._skipping:
                self._skipping = False
            else:
                out.append(bytes(self._buf))
                self._buf.clear()
            start = nl + 1
        return out

    def flush(self) -> list[bytes]:
        """What is left without a newline (end of the source)."""
        rest = [] if self._skipping or not self._buf else [bytes(self._buf)]
        self._buf.clear()
        self._skipping = False
        return rest
