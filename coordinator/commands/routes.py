"""``GET /v1/commands``: the commands the coordinators remember, and what became of each."""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from myolo.coordinator.api.respond import json_response
from myolo.coordinator.commands.answers import IntentList
from myolo.coordinator.commands.records import CommandIntent


class CommandList(Protocol):
    def intents(self) -> list[CommandIntent]: ...


def routes(commands: CommandList) -> list[web.RouteDef]:
    async def list_commands(request: web.Request) -> web.Response:
        node = request.query.get("node")
        items = [i for i in commands.intents() if node is None or i.node_id == node]
        return json_response(IntentList(items=items))

    return [web.get("/v1/commands", list_commands)]
