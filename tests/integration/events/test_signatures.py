"""A command consumer with a verifier handles only commands signed by a trusted key; the rest are
dead-lettered with the reason."""

from __future__ import annotations

import uuid

from events.bus import EventConsumer, EventProducer
from events.codec import encode
from events.examples import example_payloads
from events.signing import SigningKey, Verifier, sign
from tests.integration.events.conftest import Running, dead_letters_from, wait_until

KEY_A = SigningKey("coordinator-a", b"A" * 32)
KEY_B = SigningKey("intruder-b", b"B" * 32)


async def test_forged_missing_and_other_key_commands_are_rejected(settings, producer, fresh_topic) -> None:
    topic = await fresh_topic(1)
    command = example_payloads()["ai.myolo.command.v1"]
    async with EventProducer(settings, source="coordinator/a", signing_key=KEY_A) as signed:
        good = await signed.send(command, topic)
        # forged: a valid signature, then the payload changed on the way
        key, value, headers = encode(sign(signed.event(command), KEY_A))
        await producer.send_raw(topic, value.replace(b'"nccl_probe"', b'"drain"'), key, headers)
    await producer.send(producer.event(command), topic)  # missing signature
    async with EventProducer(settings, source="coordinator/a", signing_key=KEY_B) as other:
        await other.send(command, topic)  # signed with a key the agent does not trust

    handled = []

    async def handler(event, info) -> None:
        handled.append(event.id)

    consumer = EventConsumer(
        settings, [topic], f"g-{uuid.uuid4().hex}", handler, dead_letters=producer, verifier=Verifier([KEY_A])
    )
    run = Running(consumer)
    try:
        await wait_until(lambda: consumer.stats.consumed == 4, what="four commands")
    finally:
        await run.stop()
    assert handled == [good.id]
    letters = await dead_letters_from(settings, topic, 3)
    reasons = sorted(info["reason"] for *_, info in letters)
    assert len(reasons) == 3
    assert any("does not match" in r for r in reasons)
    assert any("not signed" in r for r in reasons)
    assert any("unknown key id 'intruder-b'" in r for r in reasons)
