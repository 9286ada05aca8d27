"""CRC-32C as TFRecord uses it: the standard check value, the mask, and chunks combined into the whole's CRC."""

from __future__ import annotations

import os

from myolo.agent.tfrecord.crc32c import Crc32c, combine, crc32c, masked


def test_the_check_value_of_crc32c() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_the_mask_is_tensorflows() -> None:
    crc = 0xE3069283
    assert masked(crc) == ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    assert masked(0) == 0xA282EAD8


def test_chunks_combine_into_the_crc_of_the_whole() -> None:
    data = os.urandom(100_003)
    for size in (1, 7, 4096, 65_536, 100_003):
        crc = Crc32c()
        for i in range(0, len(data), size):
            crc.update(data[i : i + size])
        assert crc.value == crc32c(data), size
    assert combine(crc32c(b"1234"), crc32c(b"56789"), 5) == 0xE3069283
