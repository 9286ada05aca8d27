"""A command consumer with a verifier handles only commands signed by a trusted key; the rest are
dead-lettered with the reason. The producer signs last, so the trace context it adds is signed too: a
``traceparent`` changed in transit fails the signature."""

from __future__ import annotations

import uuid

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from myolo.common.keys import Ed25519Signer, HmacKey
from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.codec import decode, encode
from myolo.events.examples import example_payloads
from myolo.events.signing import Verifier, sign
from tests.integration.events.conftest import Running, dead_letters_from, wait_until
from tests.support.helpers import read_topic

KEY_A = Ed25519Signer.generate()
KEY_B = HmacKey("intruder-b", b"B" * 32)
TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C


async def _consume(settings, topic: str, producer: EventProducer, verifier: Verifier, n: int) -> list[str]:
    handled: list[str] = []

    async def handler(event, info) -> None:
        handled.append(event.id)

    consumer = EventConsumer(
        settings, [topic], f"g-{uuid.uuid4().hex}", handler, dead_letters=producer, verifier=verifier
    )
    run = Running(consumer)
    try:
        await wait_until(lambda: consumer.stats.consumed == n, what=f"{n} commands")
    finally:
        await run.stop()
    return handled


async def test_forged_missing_and_other_key_commands_are_rejected(settings, producer, fresh_topic) -> None:
    topic = await fresh_topic(1)
    command = example_payloads()["ai.myolo.command.v1"]
    async with EventProducer(settings, source="coordinator/a", signer=KEY_A) as signed:
        good = await signed.send(command, topic)
        # forged: a valid signature, then the payload changed on the way
        key, value, headers = encode(sign(signed.event(command), KEY_A))
        await producer.send_raw(topic, value.replace(b'"nccl_probe"', b'"drain"'), key, headers)
    await producer.send(producer.event(command), topic)  # missing signature
    async with EventProducer(settings, source="coordinator/a", signer=KEY_B) as other:
        await other.send(command, topic)  # signed with a key the agent does not trust

    handled = await _consume(settings, topic, producer, Verifier([KEY_A.public]), 4)
    assert handled == [good.id]
    letters = await dead_letters_from(settings, topic, 3)
    reasons = sorted(info["reason"] for *_, info in letters)
    assert len(reasons) == 3
    assert any("does not match" in r for r in reasons)
    assert any("not signed" in r for r in reasons)
    assert any("unknown key id 'intruder-b'" in r for r in reasons)


async def test_a_traceparent_changed_in_transit_is_dead_lettered(settings, producer, fresh_topic) -> None:
    topic = await fresh_topic(1)
    span = NonRecordingSpan(SpanContext(TRACE_ID, 0xB7AD6B7169203331, is_remote=False, trace_flags=TraceFlags(1)))
    async with EventProducer(settings, source="coordinator/a", signer=KEY_A) as signed:
        with trace.use_span(span):  # the caller's trace context, injected by the producer before it signs
            good = await signed.send(example_payloads()["ai.myolo.command.v1"], topic)
    [record] = await read_topic(settings, topic)
    headers = dict(record.headers)
    assert headers["ce_traceparent"].decode().split("-")[1] == f"{TRACE_ID:032x}"  # traced, and signed as such
    Verifier([KEY_A.public]).verify(decode(record.value, record.headers, record.key))
    other = b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01"  # a hop re-parents the trace
    tampered = [(k, other if k == "ce_traceparent" else v) for k, v in record.headers]
    await producer.send_raw(topic, record.value, record.key, tampered)

    assert await _consume(settings, topic, producer, Verifier([KEY_A.public]), 2) == [good.id]
    [(*_, info)] = await dead_letters_from(settings, topic, 1)
    assert "signature does not match the command" in info["reason"]
