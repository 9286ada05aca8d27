"""``myolo-train --defense gradient_compression`` in real runs: replicas train on sparse messages and report
the bytes they sent; under tensor parallelism each shard is exchanged."""

from __future__ import annotations

from tests.support.kernels.launch import train


def test_a_defended_run_sends_a_share_of_the_dense_bytes() -> None:
    records = train("--steps", "6", "--defense", "gradient_compression", "--param", "0.01")
    steps = [r for r in records if r.get("event") == "step"]
    assert len(steps) == 6 and all(r["exchange_bytes"] > 0 for r in steps)
    start = next(r for r in records if r.get("event") == "start")
    dense = 4 * start["params"]
    ratio = steps[-1]["exchange_bytes"] / dense
    assert 0.01 <= ratio <= 0.05  # 1 % of the coordinates, an index with each top-k value, whole drawn rows
    assert all("exchange_bytes" not in r for r in train("--steps", "2") if r.get("event") == "step")


def test_the_defense_exchanges_each_tensor_parallel_shard() -> None:
    records = train("--tp", "2", "--steps", "3", "--defense", "gradient_compression", "--param", "0.1")
    steps = [r for r in records if r.get("event") == "step"]
    assert len(steps) == 3 and all(r["exchange_bytes"] > 0 for r in steps)
