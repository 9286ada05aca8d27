"""What reached Kafka, counted: samples lost or repeated (by each agent run's ``seq``), commands run twice,
dead letters from our own processes. For the chaos test and the soak, read through the broker's plain
listener after the fact."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from dataclasses import dataclass

from myolo.events.codec import decode
from myolo.events.payloads import CommandAck, NodeSample
from myolo.events.settings import KafkaSettings
from myolo.events.topics import COMMAND_ACKS, DEAD_LETTER, NODE_SAMPLES
from tests.support.helpers import read_topic


@dataclass(frozen=True)
class Samples:
    total: int
    lost: int
    duplicates: int
    runs: int  # agent starts seen (each counts seq from 1)


def sample_gaps(seqs_by_node: dict[str, list[int]]) -> Samples:
    """A seq missing inside a run is a lost sample; a seq seen twice in a run, a duplicate."""
    total = lost = dups = runs = 0
    for seqs in seqs_by_node.values():
        seen: set[int] = set()
        last = 0
        for seq in seqs:
            total += 1
            if seq == 1 and last > 0:  # a new run of the agent
                runs += 1
                seen, last = set(), 0
            elif seq in seen:
                dups += 1
                continue
            lost += max(0, seq - last - 1)
            seen.add(seq)
            last = max(last, seq)
        runs += 1 if seqs else 0
    return Samples(total=total, lost=lost, duplicates=dups, runs=runs)


def samples(settings: KafkaSettings) -> Samples:
    by_node: dict[str, list[int]] = defaultdict(list)
    for r in asyncio.run(read_topic(settings, NODE_SAMPLES)):
        data = decode(r.value, r.headers, r.key).data
        if isinstance(data, NodeSample):
            by_node[data.node_id].append(data.seq)
    return sample_gaps(by_node)


def commands_run_twice(settings: KafkaSettings) -> tuple[int, dict[str, int]]:
    """(commands acked ``accepted``, those accepted more than once): an agent acks ``accepted`` without a
    reason once per run of a command; a retry that finds it still running is acked ``accepted`` again with
    the reason that it already runs, which is no second run. Event ids de-duplicate a resent ack."""
    seen: dict[str, set[str]] = defaultdict(set)
    for r in asyncio.run(read_topic(settings, COMMAND_ACKS)):
        event = decode(r.value, r.headers, r.key)
        if isinstance(event.data, CommandAck) and event.data.status == "accepted" and not event.data.reason:
            seen[event.data.command_id].add(event.id)
    return len(seen), {c: len(ids) for c, ids in seen.items() if len(ids) > 1}


def dead_letters(settings: KafkaSettings) -> Counter[str]:
    """Dead letters by the source of the record that was refused (``?`` when it names none)."""
    out: Counter[str] = Counter()
    for r in asyncio.run(read_topic(settings, DEAD_LETTER)):
        source = dict(r.headers or ()).get("ce_source") or b"?"
        out[source.decode(errors="replace") if isinstance(source, bytes) else str(source)] += 1
    return out
