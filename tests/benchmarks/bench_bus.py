"""Produce -> consume through the real broker: our producer/consumer against a bare aiokafka loop.

Both sides run in one process, producer and consumer concurrently, on the same broker in the same run, with
the same producer settings (idempotent, acks=all, lz4, linger 5 ms) and the same records (a one-GPU node
sample). The bare loop is what a hand-written client must at least do: JSON-encode each payload with msgspec and
send it with the same ce_* headers, then JSON-decode each value (untyped) on the consumer side. Ours also
builds envelopes (id, time), propagates trace context, validates against the typed schema, deduplicates,
dead-letters, and commits only after handling. Target: our throughput >= 80 % of the bare loop's, as the median of
5 paired rounds of 50,000 records (the range is reported beside it).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.bus.producer import DEFAULT_PRODUCER_OPTIONS
from myolo.events.codec import encode
from myolo.events.envelope import new_event
from myolo.events.examples import node_sample
from myolo.events.settings import KafkaSettings
from myolo.events.topics import Topic, ensure_topics
from tests.benchmarks.broker import benchmark_broker
from tests.benchmarks.common import percentile, spread, write_result

N = 50_000  # records per round: several seconds each, so one round's noise is small
ROUNDS = 5
TARGET_RATIO = 0.8  # ours >= 0.8 of a bare aiokafka loop


def _summary(sent_at: dict[bytes | str, float], got_at: dict[bytes | str, float], t0: float) -> dict:
    lat = [(got_at[k] - sent_at[k]) * 1000 for k in got_at]
    elapsed = max(got_at.values()) - t0
    return {
        "records": len(got_at),
        "seconds": round(elapsed, 3),
        "records_per_s": round(len(got_at) / elapsed),
        "latency_ms_p50": round(percentile(lat, 50), 2),
        "latency_ms_p99": round(percentile(lat, 99), 2),
    }


def _median_round(rounds: list[dict]) -> dict:
    return sorted(rounds, key=lambda r: r["records_per_s"])[len(rounds) // 2]


async def bare_loop(settings: KafkaSettings, topic: str) -> dict:
    payload = node_sample(gpus=1)
    key, _, headers = encode(new_event(payload, "bench/bare"))
    json_encode, json_decode = msgspec.json.encode, msgspec.json.decode
    sent_at: dict[bytes | str, float] = {}
    got_at: dict[bytes | str, float] = {}
    producer = AIOKafkaProducer(**DEFAULT_PRODUCER_OPTIONS, **settings.client_kwargs())
    consumer = AIOKafkaConsumer(
        topic,
        **settings.client_kwargs(),
        group_id=f"bare-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await producer.start()
    await consumer.start()
    while not consumer.assignment():  # join the group before the clock starts, as ours does below
        await consumer.getmany(timeout_ms=100)

    async def consume() -> None:
        while len(got_at) < N:
            batches = await consumer.getmany(timeout_ms=100, max_records=500)
            now = time.perf_counter()
            for records in batches.values():
                for r in records:
                    json_decode(r.value)
                    got_at[r.headers[-1][1]] = now
            if batches:
                await consumer.commit()

    task = asyncio.create_task(consume())
    t0 = time.perf_counter()
    for i in range(N):
        mark = str(i).encode()
        sent_at[mark] = time.perf_counter()
        await producer.send(topic, value=json_encode(payload), key=key, headers=[*headers, ("seq", mark)])
    await producer.flush()
    await asyncio.wait_for(task, 300)
    await producer.stop()
    await consumer.stop()
    return _summary(sent_at, got_at, t0)


async def our_loop(settings: KafkaSettings, topic: str) -> dict:
    sent_at: dict[bytes | str, float] = {}
    got_at: dict[bytes | str, float] = {}
    done = asyncio.Event()

    async def handler(event, info) -> None:
        got_at[event.id] = time.perf_counter()
        if len(got_at) >= N:
            done.set()

    async with EventProducer(settings, source="bench/ours") as producer:
        consumer = EventConsumer(settings, [topic], f"ours-{uuid.uuid4().hex}", handler, dead_letters=producer)
        task = asyncio.create_task(consumer.run())
        await asyncio.wait_for(consumer.ready.wait(), 60)  # joined the group and got partitions
        payload = node_sample(gpus=1)
        t0 = time.perf_counter()
        for _ in range(N):
            event = producer.event(payload)
            sent_at[event.id] = time.perf_counter()
            await producer.enqueue(event, topic)
        await producer.flush()
        await asyncio.wait_for(done.wait(), 300)
        await consumer.stop()
        await task
    return _summary(sent_at, got_at, t0)


async def run(bootstrap: str) -> dict:
    settings = KafkaSettings(bootstrap=bootstrap, client_id="bench")
    topics = [Topic(f"bench.{name}.{uuid.uuid4().hex[:6]}", 6, "node id") for name in ("warm", "bare", "ours")]
    # each round reads its topic from the start with a new group: use one topic per round and side
    topics += [Topic(f"bench.r{i}.{side}.{uuid.uuid4().hex[:6]}", 6, "node id") for i in range(ROUNDS) for side in "bo"]
    await ensure_topics(settings.client_kwargs(), tuple(topics))
    await bare_loop(settings, topics[0].name)  # warm the broker and the JIT of the JVM
    bares, ourss = [], []
    for i in range(ROUNDS):  # alternate, so load from elsewhere on the machine hits both alike
        bares.append(await bare_loop(settings, topics[3 + 2 * i].name))
        ourss.append(await our_loop(settings, topics[4 + 2 * i].name))
    bare = _median_round(bares)
    ours = _median_round(ourss)
    ratios = [o["records_per_s"] / b["records_per_s"] for b, o in zip(bares, ourss, strict=True)]
    ratio = spread(ratios)["median"]
    return {
        "rounds": ROUNDS,
        "ratio_per_round": [round(r, 3) for r in ratios],
        "ratio": spread(ratios),
        "records_each": N,
        "bare_loop_does": "msgspec JSON encode per record + same ce_* headers; untyped JSON decode per record",
        "bare_aiokafka": bare,
        "myolo_events": ours,
        "throughput_ratio": ratio,  # the median of the paired rounds' ratios
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio >= TARGET_RATIO,
    }


def main() -> None:
    with benchmark_broker() as broker:
        write_result("bus", asyncio.run(run(broker.bootstrap)))


if __name__ == "__main__":
    main()
