"""``python -m tests.support.coordinator.flood N``: N node samples with made-up node ids through a real coordinator's
ingest path (CloudEvents decode and validation, dedupe window, event routing, the fleet view), no broker.

Prints one JSON line: resident memory after each tenth of the records, the nodes the view kept and the ones
it refused. ``test_bounded_memory.py`` runs it in a process of its own, so the figures are this path's.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

import psutil
from aiokafka.structs import ConsumerRecord

from myolo.coordinator.fleet.component import Fleet
from myolo.events.codec import encode
from myolo.events.envelope import new_event
from myolo.events.examples import node_sample
from myolo.events.topics import NODE_SAMPLES
from tests.support.coordinator.offline import offline_coordinator


class CountingProducer:
    """The coordinator's producers: what would be written is counted, not kept (a recorder would itself grow)."""

    def __init__(self) -> None:
        self.letters = 0

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, payload, topic=None) -> None:
        self.letters += 1

    async def send_raw(self, topic, value, key, headers) -> None:
        self.letters += 1


def records(n: int):
    """Samples of 1 GPU from a new random node each; only the node id, the key and the event id change."""
    marker = "x" * 24
    _, value, headers = encode(new_event(node_sample(marker, gpus=1), "/myolo/agent/flood"))
    for offset in range(n):
        node = os.urandom(12).hex()
        hdrs = [(k, os.urandom(16).hex().encode() if k == "ce_id" else v) for k, v in headers]
        yield ConsumerRecord(
            NODE_SAMPLES,
            0,
            offset,
            0,
            0,
            node.encode(),
            value.replace(marker.encode(), node.encode()),
            None,
            0,
            0,
            hdrs,
        )


async def main(n: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        sink = CountingProducer()
        coord = offline_coordinator(Path(tmp), producers=(sink, sink))
        me = psutil.Process()
        tenth = max(1, n // 10)
        rss: list[float] = []  # after each tenth of the records
        for i, record in enumerate(records(n), 1):
            await coord.ingest.process(record)
            if i % tenth == 0:
                rss.append(round(me.memory_info().rss / 2**20, 1))
        fleet = coord.get(Fleet)
        return {
            "records": n,
            "rss_mib_by_tenth": rss,
            "nodes_kept": len(fleet.view.nodes_by_id),
            "nodes_refused": fleet.view.refused_nodes,
            "max_nodes": fleet.cfg.max_nodes,
            "handled": coord.ingest.stats.handled,
            "dead_lettered": sink.letters,
        }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1])))))
