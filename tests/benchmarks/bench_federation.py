"""What crosses between a cell of 10,000 nodes and the federation: a cell summary's size and cost.

A cell's fleet view of 10,000 nodes in three node classes (8,000 x 8 H100, 1,500 x 8 H200, 500 x 8 A100; 1 %
Lost, 0.5 % Suspect, 0.5 % cordoned, two agent releases, 100 nodes on trial, a quarter of the GPUs held by
jobs) is summarised by ``myolo.coordinator.federation.summary.summarize``, as a cell leader does at most once a
second: its time (median of 21 runs), its JSON size and its size in an lz4 record batch. From those, the bytes a second from
10 cells (100,000 nodes) to the federation, against what the samples themselves would be (docs/scale.md).
"""

from __future__ import annotations

import statistics
import time

import msgspec

from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.federation.summary import summarize
from myolo.coordinator.fleet.model import NodeState
from myolo.events.examples import node_sample
from tests.benchmarks.common import write_result
from tests.benchmarks.sample_bytes import lz4_batches

NODES, CELLS, RUNS = 10_000, 10, 21
SAMPLE_LZ4_BYTES = 1_944  # an agent's 8-GPU sample, lz4, one a batch (bench_capacity's sample_bytes)
CLASSES = (("NVIDIA H100 80GB HBM3", 8_000), ("NVIDIA H200", 1_500), ("NVIDIA A100-SXM4-80GB", 500))


def cell_fleet() -> tuple[list[NodeState], dict[str, int]]:
    base = tuple(node_sample(gpus=8).gpus)
    nodes: list[NodeState] = []
    held: dict[str, int] = {}
    for name, count in CLASSES:
        gpus = tuple(msgspec.structs.replace(g, name=name) for g in base)
        for _ in range(count):
            i = len(nodes)
            node_id = f"node-{i:05d}"
            liveness = "Lost" if i % 100 == 0 else "Suspect" if i % 200 == 1 else "Ready"
            cordon = CordonRecord(node_id=node_id, cordoned=True, reason="xid 79", by="auto:fault", time=0.0)
            nodes.append(
                NodeState(
                    node_id=node_id,
                    gpus=gpus,
                    liveness=liveness,
                    cordon=cordon if i % 200 == 2 else None,
                    agent_version="4.1.0" if i % 10 == 0 else "4.0.0",
                    agent_on_trial="4.1.0" if i % 100 == 5 else None,
                )
            )
            if i % 4 == 0:
                held[node_id] = 8
    return nodes, held


def main() -> None:
    nodes, held = cell_fleet()
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        summary = summarize("cell-a", 1, 0.0, nodes, held)
        times.append(time.perf_counter() - t0)
    raw = msgspec.json.encode(summary)
    packed = lz4_batches([(b"cell-a", raw, [])])[0]  # one record batch, as the producer sends it
    per_s_summaries = CELLS * packed
    per_s_samples = CELLS * NODES * SAMPLE_LZ4_BYTES
    write_result(
        "federation",
        {
            "cell_nodes": NODES,
            "node_classes": len(summary.classes),
            "summarize_ms": round(statistics.median(times) * 1e3, 2),
            "summarize_share_of_a_core_at_1_hz": round(statistics.median(times), 4),
            "summary_json_bytes": len(raw),
            "summary_lz4_bytes": packed,
            "cells": CELLS,
            "to_federation_bytes_per_s_at_1_hz": per_s_summaries,
            "samples_bytes_per_s_lz4_for_comparison": per_s_samples,
            "reduction": round(per_s_samples / per_s_summaries),
        },
    )


if __name__ == "__main__":
    main()
