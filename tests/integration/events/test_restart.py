"""Producer idempotence across a broker restart: every event sent before, during and after is consumed,
and none is handled twice."""

from __future__ import annotations

import asyncio
import uuid

from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.examples import node_sample
from tests.integration.events.conftest import Running, wait_until


async def test_nothing_lost_or_doubled_across_a_broker_restart(kafka, settings, fresh_topic) -> None:
    topic = await fresh_topic(3)
    handled: list[str] = []

    async def handler(event, info) -> None:
        handled.append(event.id)

    sent: list[str] = []
    async with EventProducer(settings, source="test/restart", request_timeout_ms=60_000) as producer:
        consumer = EventConsumer(settings, [topic], f"g-{uuid.uuid4().hex}", handler, dead_letters=producer)
        run = Running(consumer)
        stop_sending = asyncio.Event()

        pending: list[tuple[str, asyncio.Future]] = []  # every event enqueued, with its acknowledgement to come

        async def send_forever() -> None:
            seq = 0
            while not stop_sending.is_set():
                event, fut = await producer.enqueue(node_sample(f"node-{seq % 7}", gpus=1, seq=seq), topic)
                pending.append((event.id, fut))
                seq += 1
                await asyncio.sleep(0.01)  # pacing of the load, not waiting for time-based behaviour
            for event_id, fut in pending:
                await fut  # every enqueued event must be acknowledged, restart or not
                sent.append(event_id)

        sender = asyncio.create_task(send_forever())
        await wait_until(lambda: len(handled) >= 50, what="events before the restart")
        await asyncio.to_thread(kafka.stop)
        down_at = len(pending)
        await wait_until(
            lambda: len(pending) >= down_at + 20, timeout=60, what="events enqueued while the broker is down"
        )
        # start from the main thread: the broker is tied to the thread that forks it (PR_SET_PDEATHSIG),
        # and a worker thread of asyncio.to_thread ends with the test's loop, which would kill it
        kafka.start()
        before = len(handled)
        await wait_until(lambda: len(handled) >= before + 50, timeout=120, what="events after the restart")
        stop_sending.set()
        await asyncio.wait_for(sender, 120)
        await wait_until(lambda: len(set(handled)) >= len(sent), timeout=120, what="every acknowledged event")
        await run.stop()
    assert len(sent) > 100
    assert set(handled) == set(sent)
    assert len(handled) == len(set(handled)), "an event was handled twice"
