"""The ``check_tfrecords`` action: patterns expanded on the node, only regular files read, a budget over all."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from myolo.agent.tfrecord.action import check_paths, check_tfrecords_action
from myolo.agent.tfrecord.check import frame
from myolo.events.payloads.commands import CheckTfrecordsResult, action_args, action_result


def shards(d: Path, n: int = 3) -> list[Path]:
    paths = []
    for i in range(n):
        p = d / f"train.tfrecord-{i:05d}-of-{n:05d}"
        p.write_bytes(b"".join(frame(f"shard {i} record {j}".encode()) for j in range(10)))
        paths.append(p)
    return paths


def test_a_pattern_checks_each_file_it_matches_and_names_the_bad_one(tmp_path: Path) -> None:
    paths = shards(tmp_path)
    data = bytearray(paths[1].read_bytes())
    data[-1] ^= 1  # the last record's data CRC
    paths[1].write_bytes(data)
    out = check_paths([str(tmp_path / "train.tfrecord-*")], 1 << 30, 100)
    (found,) = out.values()
    assert [Path(f.path).name[-14:] for f in found.files] == [p.name[-14:] for p in paths]
    assert [f.bad_offset is None for f in found.files] == [True, False, True]
    bad = found.files[1]
    assert bad.records == 9 and bad.problem == "data" and bad.bad_offset == len(data) - len(frame(b"shard 1 record 9"))


def test_what_cannot_be_checked_says_why(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.tfrecord")
    out = check_paths(["relative.tfrecord", str(tmp_path / "none-*.tfrecord"), str(tmp_path / "fifo.tfrecord")], 1, 9)
    assert "absolute" in (out["relative.tfrecord"].error or "")
    assert "no file matches" in (out[str(tmp_path / "none-*.tfrecord")].error or "")
    assert "FIFO" in (out[str(tmp_path / "fifo.tfrecord")].files[0].error or "")


def test_the_budget_and_the_file_limit_bound_a_command(tmp_path: Path) -> None:
    paths = shards(tmp_path, 4)
    size = paths[0].stat().st_size
    out = check_paths([str(tmp_path / "*")], size * 2, 3)
    (found,) = out.values()
    assert found.truncated and len(found.files) == 3
    assert [f.error is None for f in found.files] == [True, True, False]
    assert "max_bytes" in (found.files[2].error or "")


async def test_the_action_answers_what_the_contract_reads(tmp_path: Path) -> None:
    (p,) = shards(tmp_path, 1)
    args = action_args("check_tfrecords", {"paths": [str(p)]})
    result = await check_tfrecords_action()(args)
    read = action_result("check_tfrecords", msgspec.json.decode(msgspec.json.encode(result)))
    assert read == msgspec.convert(result, CheckTfrecordsResult)
    assert read[str(p)].files[0].records == 10
