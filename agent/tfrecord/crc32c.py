"""CRC-32C (Castagnoli), as TFRecord frames its records, over data streamed in chunks.

The checksum itself is aiokafka's (a dependency already: Kafka's record batches use CRC-32C; its Cython
build reads ~2 GB/s here, its pure-Python fallback is table-driven). A record larger than one chunk is checked
chunk by chunk: the CRCs of consecutive chunks are combined as zlib's ``crc32_combine`` does (the CRC of A
shifted past len(B) zero bytes by a GF(2) operator, then xored with B's), so memory stays one chunk whatever
a record's length.
"""

from __future__ import annotations

from functools import lru_cache

from aiokafka.record.util import calc_crc32c

POLY = 0x82F63B78  # Castagnoli, reflected
MASK_DELTA = 0xA282EAD8
U32 = 0xFFFFFFFF


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C of ``data`` (``crc32c(b"123456789") == 0xE3069283``)."""
    return calc_crc32c(data)


def masked(crc: int) -> int:
    """TFRecord's masked CRC: rotated right by 15 bits plus a constant, so a CRC of CRCs is not trivially one."""
    return ((((crc >> 15) | (crc << 17)) & U32) + MASK_DELTA) & U32


def _times(matrix: tuple[int, ...], vector: int) -> int:
    out, i = 0, 0
    while vector:
        if vector & 1:
            out ^= matrix[i]
        vector >>= 1
        i += 1
    return out


def _compose(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_times(a, column) for column in b)


@lru_cache(maxsize=64)
def _zeros(nbytes: int) -> tuple[int, ...]:
    """The operator that moves a CRC past ``nbytes`` zero bytes (powers of the one-zero-bit operator)."""
    result = tuple(1 << i for i in range(32))  # identity
    base = (POLY, *(1 << i for i in range(31)))  # one zero bit
    n = 8 * nbytes
    while n:
        if n & 1:
            result = _compose(base, result)
        base = _compose(base, base)
        n >>= 1
    return result


def combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32C of A + B from ``crc1`` = CRC(A), ``crc2`` = CRC(B) and ``len2`` = len(B)."""
    return (_times(_zeros(len2), crc1) ^ crc2) if len2 else crc1


class Crc32c:
    """A running CRC-32C: ``update`` with each chunk, ``value`` at the end. The first chunk costs its CRC alone;
    each further one a combination (its operator cached by length: the chunks of a large record share one)."""

    __slots__ = ("_started", "value")

    def __init__(self) -> None:
        self.value = 0
        self._started = False

    def update(self, chunk: bytes | bytearray | memoryview) -> None:
        if self._started:
            self.value = combine(self.value, crc32c(chunk), len(chunk))
        else:
            self.value, self._started = crc32c(chunk), True
