"""Bytes of the node sample on the wire: JSON, and lz4 record batches built the way the producer builds them.

Samples come from the agent's simulated backend (``build_sample``), one node each, as read (every NVLink listed)
and as published (:func:`myolo.events.payloads.compact.compact_sample`). Kafka compresses whole record batches, so
lz4 is measured on aiokafka's own batch builder, with the producer's compression and batch size: a batch of
one record (an agent sends about one sample per linger window) and ``nodes`` samples of distinct nodes
filling batches of the producer's ``max_batch_size`` in turn (``lz4_batches_built`` of them: a producer speaking
for many nodes, such as the fleet simulator).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from myolo.agent.gpu.sample import build_sample
from myolo.agent.gpu.sim import SimBackend
from myolo.agent.health.state import HealthState
from myolo.common.clock import SimClock
from myolo.events.bus.producer import DEFAULT_PRODUCER_OPTIONS
from myolo.events.codec import decode, encode
from myolo.events.envelope import new_event
from myolo.events.payloads import NodeSample
from myolo.events.payloads.compact import compact_sample

LZ4 = 3  # the record batch's compression code
Record = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


async def _sim_samples(nodes: int, gpus: int, warm_s: float = 600.0) -> list[NodeSample]:
    """One sample per node, ``warm_s`` into its run (busy GPUs, counters moving), after a first one."""
    clock = SimClock()
    backends = []
    for n in range(nodes):
        node_id = f"node-{n:05d}"
        backend = SimBackend(gpus, clock, seed=n, node_tag=node_id)
        backend.open()
        health = HealthState(clock)
        build_sample(backend, node_id, health, seq=1)
        backends.append((node_id, backend, health))
    await clock.advance(warm_s)
    return [build_sample(b, node_id, h, seq=2) for node_id, b, h in backends]


def lz4_batches(records: list[Record]) -> list[int]:
    """Bytes of each lz4 record batch that carries ``records`` in order (a full batch starts the next)."""
    size = int(DEFAULT_PRODUCER_OPTIONS["max_batch_size"])
    out: list[int] = []
    builder, offset = None, 0
    for key, value, headers in records:
        while True:
            if builder is None:
                builder, offset = DefaultRecordBatchBuilder(2, LZ4, 0, -1, -1, -1, size), 0
            if builder.append(offset, 0, key, value, headers) is not None:
                offset += 1
                break
            out.append(len(builder.build()))
            builder = None
    return out + ([len(builder.build())] if builder is not None else [])


def _decodes_per_s(record: Record, n: int = 2000) -> int:
    """decode + validate per second of CPU time (best of 3), as the coordinator's consumer does it."""
    key, value, headers = record
    best = 0.0
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(n):
            decode(value, headers, key)
        best = max(best, n / max(time.process_time() - t0, 1e-9))
    return round(best)


def _form(samples: list[NodeSample], shape: Callable[[NodeSample], NodeSample], per_s: int) -> dict[str, Any]:
    records = [encode(new_event(shape(s), f"agent/{s.node_id}")) for s in samples]
    batches = lz4_batches(records)
    json_bytes, alone, in_batch = len(records[0][1]), lz4_batches(records[:1])[0], sum(batches) / len(records)
    return {
        "json_8gpu": json_bytes,
        "lz4_batch_of_1": alone,
        f"lz4_per_sample_in_batch_of_{len(records)}": round(in_batch),
        "lz4_batches_built": len(batches),
        f"mb_per_s_at_{per_s}_nodes": {
            "json": round(json_bytes * per_s / 1e6, 1),
            "lz4_batch_of_1": round(alone * per_s / 1e6, 1),
            f"lz4_in_batch_of_{len(records)}": round(in_batch * per_s / 1e6, 1),
        },
        "decode_validate_per_s": _decodes_per_s(records[0]),
    }


def measure(nodes: int = 200, gpus: int = 8, fleet: int = 10_000) -> dict[str, dict[str, Any]]:
    """JSON and lz4 bytes of an 8-GPU sample, published and as read, and MB/s at ``fleet`` nodes at 1 Hz."""
    samples = asyncio.run(_sim_samples(nodes, gpus))
    return {
        "published": _form(samples, compact_sample, fleet),
        "as_read_every_nvlink_listed": _form(samples, lambda s: s, fleet),
    }
