"""Check a TFRecord file record by record, streaming, and say where the first bad record starts.

A record is ``uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)``
(little-endian). The header's CRC is checked before its length is trusted, so a corrupt length is reported as
such instead of sending the reader far off; the data are read in chunks, so memory stays one chunk whatever a
record claims. The answer names the first bad record's offset (the start of its header) and which part is
wrong: ``length`` (the length or its CRC), ``data`` (the data or their CRC) or ``truncated`` (the file ends
inside the record).
"""

from __future__ import annotations

import struct
import threading
from typing import BinaryIO

from myolo.agent.tfrecord.crc32c import Crc32c, crc32c, masked
from myolo.events.payloads.commands import TfRecordFile

CHUNK_BYTES = 4 << 20
HEADER = 12
FOOTER = 4


class Stopped(Exception):
    """The command was cancelled while a file was read."""


def check_stream(
    f: BinaryIO,
    path: str,
    size: int,
    stop: threading.Event | None = None,
    chunk: int = CHUNK_BYTES,
) -> TfRecordFile:
    """Every record of ``f`` (``size`` bytes long) checked; the first bad one ends the check."""
    out = TfRecordFile(path=path, size=size)
    offset = 0

    def bad(problem: str, reason: str) -> TfRecordFile:
        out.bad_offset, out.problem, out.error = offset, problem, f"record {out.records} at byte {offset}: {reason}"
        return out

    while True:
        if stop is not None and stop.is_set():
            raise Stopped
        header = f.read(HEADER)
        if not header:
            return out
        if len(header) < HEADER:
            return bad("truncated", f"the file ends {len(header)} bytes into a {HEADER}-byte header")
        (length,) = struct.unpack_from("<Q", header)
        (length_crc,) = struct.unpack_from("<I", header, 8)
        if masked(crc32c(header[:8])) != length_crc:
            return bad("length", "the length's CRC does not match: the length or its CRC is corrupt")
        end = offset + HEADER + length + FOOTER
        if end > size:
            return bad(
                "truncated", f"the record claims {length} bytes of data, which runs {end - size} bytes past the end"
            )
        crc, left = Crc32c(), length
        while left:
            if stop is not None and stop.is_set():
                raise Stopped
            data = f.read(min(chunk, left))
            if not data:
                return bad("truncated", f"the file ended {length - left} bytes into the record's data")
            crc.update(data)
            left -= len(data)
        footer = f.read(FOOTER)
        if len(footer) < FOOTER:
            return bad("truncated", "the file ends inside the data's CRC")
        if masked(crc.value) != struct.unpack("<I", footer)[0]:
            return bad("data", "the data's CRC does not match: the data or their CRC is corrupt")
        out.records += 1
        out.bytes += length
        offset = end


def frame(data: bytes) -> bytes:
    """One record as TFRecord writes it (for tests and tools that make small files)."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked(crc32c(length))) + data + struct.pack("<I", masked(crc32c(data)))
