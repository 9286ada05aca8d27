"""Every event type goes through the real broker and comes back equal, with headers and trace context."""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from myolo.events.bus import EventConsumer
from myolo.events.examples import example_payloads
from tests.integration.events.conftest import Running, wait_until

_provider = TracerProvider()
trace.set_tracer_provider(_provider)  # a recording provider, so spans have real trace ids


async def test_every_type_round_trips_with_trace_context(settings, producer, fresh_topic) -> None:
    topic = await fresh_topic()
    tracer = trace.get_tracer("test")
    sent = {}
    with tracer.start_as_current_span("myolo.agent.publish") as span:
        trace_id = span.get_span_context().trace_id
        for type_, payload in example_payloads().items():
            event = producer.event(payload, subject=f"subject-of-{type_}")
            event.extensions["site"] = "rack-7"
            sent[event.id] = await producer.send(event, topic)

    got: dict = {}
    seen_trace: dict = {}

    async def handler(event, info) -> None:
        got[event.id] = event
        seen_trace[event.id] = trace.get_current_span().get_span_context().trace_id

    run = Running(EventConsumer(settings, [topic], f"g-{uuid.uuid4().hex}", handler, dead_letters=producer))
    try:
        await wait_until(lambda: len(got) == len(sent), what="all events")
    finally:
        await run.stop()
    for event_id, event in sent.items():
        back = got[event_id]
        assert back.data == event.data
        assert (back.type, back.source, back.subject, back.key, back.time) == (
            event.type,
            event.source,
            event.subject,
            event.key,
            event.time,
        )
        assert back.extensions["site"] == "rack-7"
        assert back.extensions["traceparent"].split("-")[1] == f"{trace_id:032x}"
        assert seen_trace[event_id] == trace_id  # the consumer's span continues the producer's trace
    assert run.consumer.stats.dead_lettered == 0


async def test_binary_mode_headers_on_the_wire(settings, producer, fresh_topic) -> None:
    """What other clients see: ce_* headers, JSON value, key = the entity."""
    topic = await fresh_topic(1)
    payload = example_payloads()["ai.myolo.node.fault.v1"]
    event = await producer.send(payload, topic)
    consumer = AIOKafkaConsumer(topic, **settings.client_kwargs(), auto_offset_reset="earliest")
    await consumer.start()
    try:
        record = await consumer.getone()
    finally:
        await consumer.stop()
    headers = dict(record.headers)
    assert headers["ce_specversion"] == b"1.0"
    assert headers["ce_id"] == event.id.encode()
    assert headers["ce_type"] == b"ai.myolo.node.fault.v1"
    assert headers["content-type"] == b"application/json"
    assert record.key == payload.node_id.encode()
    assert record.value.startswith(b"{")
