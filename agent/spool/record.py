"""How one Kafka record is framed inside a spool segment file.

A frame is ``magic(2) | length(4) | crc32(4) | seq(8) | body``; the body is the msgpack of
:class:`SpoolRecord`. The CRC covers seq and body, so a damaged frame (a flipped bit, a half-written frame
when the power went) is recognised, and the magic lets a reader find the next good frame after it: one bad
frame costs that frame, not the rest of the segment.
"""

from __future__ import annotations

import struct
import zlib

import msgspec

MAGIC = b"\xa7\x5e"
HEADER = struct.Struct(">2sIIQ")  # magic, body length, crc32(seq + body), seq
MAX_BODY = 16 << 20


class SpoolRecord(msgspec.Struct, array_like=True):
    """A Kafka record exactly as it will be sent: topic, key, value and headers (CloudEvents binary mode)."""

    topic: str
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


_ENC = msgspec.msgpack.Encoder()
_DEC = msgspec.msgpack.Decoder(SpoolRecord)


class CorruptFrame(Exception):
    """The bytes at this offset are not a whole, valid frame (a torn write, a flipped bit or foreign data)."""


def pack(seq: int, record: SpoolRecord) -> bytes:
    body = _ENC.encode(record)
    return HEADER.pack(MAGIC, len(body), _crc(seq, body), seq) + body


def unpack_header(buf: bytes) -> tuple[int, int, int]:
    """``(body_length, crc, seq)`` of a frame header, or :class:`CorruptFrame`."""
    if len(buf) < HEADER.size:
        raise CorruptFrame("short header")
    magic, length, crc, seq = HEADER.unpack_from(buf)
    if magic != MAGIC:
        raise CorruptFrame("bad magic")
    if length > MAX_BODY:
        raise CorruptFrame(f"body length {length} above {MAX_BODY}")
    return length, crc, seq


def check_body(seq: int, crc: int, body: bytes, length: int) -> SpoolRecord:
    """The record in ``body``, or :class:`CorruptFrame` when it is short, fails its CRC or does not decode."""
    if len(body) < length:
        raise CorruptFrame("short body")
    if _crc(seq, body) != crc:
        raise CorruptFrame("checksum mismatch")
    try:
        return _DEC.decode(body)
    except msgspec.DecodeError as exc:
        raise CorruptFrame(f"undecodable body: {exc}") from None


def _crc(seq: int, body: bytes) -> int:
    return zlib.crc32(body, zlib.crc32(seq.to_bytes(8, "big")))
