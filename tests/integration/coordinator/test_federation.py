"""Two cells and a federation exchanging summaries and intents over the real broker, with both sides'
leaders failing over: a deposed leader's late records are refused by every reader, in partition order."""

from __future__ import annotations

import uuid

import msgspec
from aiokafka import AIOKafkaProducer

from myolo.coordinator.federation.board import SummaryBoard
from myolo.coordinator.federation.inbox import CellInbox
from myolo.coordinator.federation.records import CellIntent, FederationTerm, PlaceJob, RolloutWave
from myolo.coordinator.federation.summary import summarize
from myolo.coordinator.fleet.model import NodeState
from myolo.events.examples import node_sample
from myolo.events.settings import KafkaSettings
from myolo.events.topics import Topic, ensure_topics
from tests.support.helpers import read_topic

GPUS = tuple(node_sample(gpus=8).gpus)


def _fleet(prefix: str, n: int, lost: int = 0) -> list[NodeState]:
    return [
        NodeState(node_id=f"{prefix}-{i:04d}", gpus=GPUS, liveness="Lost" if i < lost else "Ready") for i in range(n)
    ]


async def test_deposed_leaders_are_fenced_on_both_sides(settings: KafkaSettings) -> None:
    tag = uuid.uuid4().hex[:8]
    summaries, intents = f"test.fed.summaries.{tag}", f"test.fed.intents.{tag}"
    await ensure_topics(
        settings.client_kwargs(),
        (Topic(summaries, 2, "cell", compacted=True), Topic(intents, 2, "cell", compacted=True)),
    )
    producer = AIOKafkaProducer(**settings.client_kwargs(), acks="all", enable_idempotence=True)
    await producer.start()

    async def put(topic: str, cell: str, record: msgspec.Struct) -> None:
        await producer.send_and_wait(topic, msgspec.json.encode(record), key=cell.encode())

    try:
        # cells report: cell a's leader (epoch 1) fails over to epoch 2, then the deposed one sends a late summary
        await put(summaries, "a", summarize("a", 1, 10.0, _fleet("a", 300)))
        await put(summaries, "b", summarize("b", 5, 10.0, _fleet("b", 200, lost=20)))
        await put(summaries, "a", summarize("a", 2, 11.0, _fleet("a", 300, lost=40)))
        await put(summaries, "a", summarize("a", 1, 12.0, _fleet("a", 300)))  # deposed, not knowing it yet
        # the federation decides: F1 (epoch 1), then F2 takes over and fences every cell before acting
        await put(intents, "a", CellIntent(cell="a", intent=FederationTerm(epoch=1, leader="f1")))
        await put(intents, "b", CellIntent(cell="b", intent=FederationTerm(epoch=1, leader="f1")))
        await put(intents, "a", CellIntent(cell="a", intent=RolloutWave(epoch=1, release="4.1.0", share=0.1)))
        for cell in ("a", "b"):
            await put(intents, cell, CellIntent(cell=cell, intent=FederationTerm(epoch=2, leader="f2")))
        await put(intents, "b", CellIntent(cell="b", intent=PlaceJob(epoch=2, job="llm-7b", gpu=GPUS[0].name, gpus=64)))
        late = RolloutWave(epoch=1, release="4.0.9", share=1.0)  # F1, deposed: would roll every node back
        await put(intents, "b", CellIntent(cell="b", intent=late))
        await producer.send_and_wait(intents, b'{"cell": "b", "intent": {"type": "format-disks"}}', key=b"b")
    finally:
        await producer.stop()

    board = SummaryBoard()
    for record in await read_topic(settings, summaries):
        board.receive(record.value)
    assert board.by_cell["a"].epoch == 2 and board.by_cell["a"].classes[0].lost == 40
    assert board.by_cell["b"].nodes == 200 and board.by_cell["b"].classes[0].schedulable == 180
    assert board.refused == ["epoch: 1 from 'a' is older than its epoch 2 already seen (a deposed leader)"]
    assert board.schedulable_gpus(GPUS[0].name + " x8") == {"a": 260 * 8, "b": 180 * 8}

    inboxes = {cell: CellInbox(cell) for cell in ("a", "b")}
    for record in await read_topic(settings, intents):  # partition order: each cell's intents in order
        inboxes[record.key.decode()].receive(record.value)
    assert inboxes["a"].applied == [RolloutWave(epoch=1, release="4.1.0", share=0.1)]
    assert inboxes["b"].applied == [PlaceJob(epoch=2, job="llm-7b", gpu=GPUS[0].name, gpus=64)]
    assert late not in inboxes["b"].applied
    assert inboxes["b"].refused[0].startswith("epoch: 1 from 'federation' is older than its epoch 2")
    assert inboxes["b"].refused[1].startswith("intent: ") and "format-disks" in inboxes["b"].refused[1]
