"""The fleet's reads: ``GET /v1/nodes``, ``/v1/nodes/{node_id}``, ``/v1/gpus`` (served by every coordinator),
and the operator's ``POST /v1/nodes/{node_id}/interval`` (the leader sends the agent ``set_interval``)."""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from myolo.coordinator.api.body import MAX_SMALL_BODY, read_json
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.commands.interface import SentCommand
from myolo.coordinator.core.errors import UnknownNode
from myolo.coordinator.fleet import answers as views
from myolo.coordinator.fleet.answers import INTERVAL_HINT, IntervalRequest, IntervalSent
from myolo.coordinator.fleet.model import NodeState


class FleetReads(Protocol):
    def now(self) -> float:
        """The coordinator's clock (ages of samples are computed on it, not the caller's)."""

    def nodes(self) -> list[NodeState]: ...

    def node(self, node_id: str) -> NodeState | None: ...

    async def set_interval(self, node_id: str, interval_s: float) -> SentCommand:
        """Send the node's agent ``set_interval``. Raises UnknownNode, NotLeader, Invalid (``interval_s``)."""


def routes(fleet: FleetReads) -> list[web.RouteDef]:
    async def list_nodes(request: web.Request) -> web.Response:
        now = fleet.now()
        items = [views.node_summary(n, now) for n in sorted(fleet.nodes(), key=lambda n: n.node_id)]
        return json_response({"now": now, "items": items})

    async def get_node(request: web.Request) -> web.Response:
        node_id = request.match_info["node_id"]
        node = fleet.node(node_id)
        if node is None:
            raise UnknownNode(node_id)
        return json_response(views.node_json(node, fleet.now()))

    async def list_gpus(request: web.Request) -> web.Response:
        nodes = sorted(fleet.nodes(), key=lambda n: n.node_id)
        return json_response({"now": fleet.now(), "items": views.gpu_rows(nodes)})

    async def set_interval(request: web.Request) -> web.Response:
        node_id = request.match_info["node_id"]
        body = await read_json(request, IntervalRequest, INTERVAL_HINT, MAX_SMALL_BODY)
        sent = await fleet.set_interval(node_id, body.interval_s)
        return json_response(IntervalSent(node_id=node_id, command_id=sent.command_id, interval_s=body.interval_s), 202)

    return [
        web.get("/v1/nodes", list_nodes),
        web.get("/v1/nodes/{node_id}", get_node),
        web.get("/v1/gpus", list_gpus),
        web.post("/v1/nodes/{node_id}/interval", set_interval),
    ]
