"""``POST /v1/nodes/{node_id}/interval``: the fleet sends a known node's agent the signed ``set_interval``
through CommandSender, and refuses an interval the agent would refuse, naming ``interval_s``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from myolo.common.clock import SimClock
from myolo.coordinator.api.errors import json_errors
from myolo.coordinator.commands.dispatcher import check_args
from myolo.coordinator.commands.interface import CommandSender, SentCommand
from myolo.coordinator.core.context import Context
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.fleet.config import FleetConfig
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, NodeSample
from myolo.events.payloads.commands import ActionArgs, SetIntervalArgs

CLOCK = SimClock()


class Sender:
    """CommandSender checking the arguments as the real one does, and keeping what it sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, ActionArgs]] = []

    async def issue(self, node_id: str, args: ActionArgs) -> SentCommand:
        check_args(args)  # ValueError naming args.<field>, before anything is sent
        self.sent.append((node_id, args))
        return SentCommand(command_id=f"c{len(self.sent)}", node_id=node_id, action=args.action, args=args)

    def intent(self, command_id: str) -> SentCommand | None:
        return None

    def has_pending(self, node_id: str, action: str) -> bool:
        return False


def fleet_with(sender: Sender, *nodes: str) -> Fleet:
    fields: dict[str, Any] = dict.fromkeys(("core", "store", "producer", "signed", "leadership", "ingest"))
    ctx = Context(
        component="fleet", instance_id="c1", clock=CLOCK, config=FleetConfig(), needs={CommandSender: sender}, **fields
    )
    fleet = Fleet(ctx)
    for node in nodes:
        sample = NodeSample(node_id=node, backend="sim", gpus=[GpuReading(index=0, uuid="GPU-0", name="sim")])
        fleet.view.apply(new_event(sample, "test", clock=CLOCK), CLOCK.now())
    return fleet


@pytest.fixture
async def sent() -> AsyncIterator[tuple[TestClient, Sender]]:
    sender = Sender()
    app = web.Application(middlewares=[json_errors])
    app.add_routes(fleet_with(sender, "n1").api().routes)
    client = TestClient(TestServer(app))
    await client.start_server()
    yield client, sender
    await client.close()


async def test_a_good_interval_issues_set_interval_and_answers_the_command_id(sent) -> None:
    client, sender = sent
    resp = await client.post("/v1/nodes/n1/interval", json={"interval_s": 2.5})
    assert resp.status == 202, await resp.text()
    assert await resp.json() == {"node_id": "n1", "command_id": "c1", "interval_s": 2.5}
    assert sender.sent == [("n1", SetIntervalArgs(interval_s=2.5))]


@pytest.mark.parametrize("body", [{"interval_s": 0.0}, {"interval_s": 7200}, {"interval_s": "fast"}, {}])
async def test_a_bad_interval_is_a_400_naming_the_field(sent, body: dict[str, Any]) -> None:
    client, sender = sent
    resp = await client.post("/v1/nodes/n1/interval", json=body)
    assert resp.status == 400, await resp.text()
    error = await resp.json()
    assert error["field"] == "interval_s" and "interval_s" in error["hint"], error
    assert sender.sent == []


async def test_an_unknown_field_or_node_is_refused_before_anything_is_sent(sent) -> None:
    client, sender = sent
    unknown = await client.post("/v1/nodes/n1/interval", json={"interval_s": 2, "every": 3})
    assert unknown.status == 400 and (await unknown.json())["field"] == "every"
    missing = await client.post("/v1/nodes/n9/interval", json={"interval_s": 2})
    assert missing.status == 404
    assert sender.sent == []
