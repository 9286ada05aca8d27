"""Files written here, corrupted in each field of a record: the checker names the first bad record's offset and
what is wrong, streaming (a record larger than its chunk is still checked whole)."""

from __future__ import annotations

import io
import struct
import threading
from pathlib import Path

import pytest

from myolo.agent.tfrecord.check import Stopped, check_stream, frame
from myolo.agent.tfrecord.crc32c import crc32c, masked

RECORDS = [b"first record", b"x" * 5000, b"", b"third \x00\xff bytes"]


def tfrecord(records: list[bytes] = RECORDS) -> bytearray:
    return bytearray(b"".join(frame(r) for r in records))


def check(data: bytes | bytearray, chunk: int = 1024):
    return check_stream(io.BytesIO(bytes(data)), "/data/x.tfrecord", len(data), chunk=chunk)


SECOND = len(frame(RECORDS[0]))  # offset of the second record


def test_a_good_file_reads_every_record() -> None:
    found = check(tfrecord())
    assert (found.records, found.bytes, found.bad_offset, found.problem, found.error) == (
        4,
        sum(map(len, RECORDS)),
        None,
        None,
        None,
    )


def test_the_frame_is_tensorflows() -> None:
    data = b"abc"
    head = struct.pack("<Q", 3)
    assert frame(data) == head + struct.pack("<I", masked(crc32c(head))) + data + struct.pack(
        "<I", masked(crc32c(data))
    )


def test_an_empty_file_has_no_records_and_nothing_wrong() -> None:
    found = check(b"")
    assert found.records == 0 and found.bad_offset is None


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        (0, "length"),  # the length's first byte
        (7, "length"),  # its last
        (8, "length"),  # the length's CRC
        (11, "length"),
        (12, "data"),  # the data's first byte
        (12 + 4999, "data"),  # its last
        (12 + 5000, "data"),  # the data's CRC
        (12 + 5003, "data"),
    ],
)
def test_a_corrupt_field_of_the_second_record_is_named_at_its_offset(where: int, problem: str) -> None:
    data = tfrecord()
    data[SECOND + where] ^= 0x40
    found = check(data)
    assert (found.records, found.bad_offset, found.problem) == (1, SECOND, problem)
    assert found.error is not None and f"at byte {SECOND}" in found.error


@pytest.mark.parametrize("cut", [1, 11, 12, 12 + 2500, 12 + 5000, 12 + 5003])
def test_a_truncated_file_is_named_at_the_record_it_cuts(cut: int) -> None:
    data = tfrecord()[: SECOND + cut]
    found = check(data)
    assert (found.records, found.bad_offset, found.problem) == (1, SECOND, "truncated")


def test_a_huge_claimed_length_is_caught_before_any_read() -> None:
    head = struct.pack("<Q", 1 << 60)
    data = tfrecord()[:SECOND] + head + struct.pack("<I", masked(crc32c(head))) + b"tiny"
    found = check(data)
    assert (found.bad_offset, found.problem) == (SECOND, "truncated") and "past the end" in (found.error or "")


def test_memory_stays_one_chunk_for_a_large_record(tmp_path: Path) -> None:
    big = tmp_path / "big.tfrecord"
    big.write_bytes(frame(bytes(range(256)) * 8192))  # 2 MiB in one record

    class Reads(io.FileIO):
        largest = 0

        def read(self, n: int = -1) -> bytes:
            Reads.largest = max(Reads.largest, n)
            return super().read(n)

    with Reads(big, "r") as f:
        found = check_stream(f, str(big), big.stat().st_size, chunk=64 << 10)
    assert found.records == 1 and found.bad_offset is None
    assert Reads.largest == 64 << 10


def test_a_stop_ends_the_check() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        check_stream(io.BytesIO(bytes(tfrecord())), "x", 10, stop)
