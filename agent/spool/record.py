"""How one Kafka record is framed inside a spool segment file.

A frame is ``magic(2) | length(4) | crc32(4) | seq(8) | body``; the body is the msgpack of
:class:`SpoolRecord`. The CRC covers seq and body, so a frame half-written when the power went is detected on
the next start and the segment is cut back to its last whole frame, instead of feeding garbage to Kafka.
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
    """The bytes at this offset are not a whole, valid frame (a torn write or foreign data)."""


def pack(seq: int, record: SpoolRecord) -> bytes:
    body = _ENC.encode(record)
    seq_bytes = seq.to_bytes(8, "big")
    crc = zlib.crc32(body, zlib.crc32(seq_bytes))
    return HEADER.pack(MAGIC, len(body), crc, seq) + body


def unpack_header(buf: bytes) -> tuple[int, int, int]:
    """``(body_length, crc, seq)`` of a frame header, or :class:`CorruptFrame`."""
    if len(buf) < HEADER.size:
        raise CorruptFrame("short header")
    magic, length, crc, seq = HEADER.unpack(buf[: HEADER.size])
    if magic != MAGIC or length > MAX_BODY:
        raise CorruptFrame("bad magic or length")
    return length, crc, seq


def check_body(seq: int, crc: int, body: bytes, length: int) -> SpoolRecord:
    if len(body) < length:
        raise CorruptFrame("short body")
    if zlib.crc32(body, zlib.crc32(seq.to_bytes(8, "big"))) != crc:
        raise CorruptFrame("checksum mismatch")
    try:
        return _DEC.decode(body)
    except msgspec.DecodeError as exc:
        raise CorruptFrame(f"undecodable body: {exc}") from None
