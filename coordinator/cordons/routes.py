"""The operator's writes: ``POST /v1/nodes/{node_id}/cordon|uncordon`` (the leader takes them; a standby's
answer is a 307 to the leader, made by the API's error middleware from ``NotLeader``). Who cordons is the
caller's token (``operator:<token name>``); a ``by`` in the body is refused, so nobody writes another's name."""

from __future__ import annotations

from typing import Annotated, Protocol

import msgspec
from aiohttp import web

from myolo.coordinator.api.auth import caller
from myolo.coordinator.api.body import read_json
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.cordons.answers import CordonAnswer
from myolo.coordinator.cordons.records import CordonRecord

MAX_REASON = 500
_HINT = 'send a JSON object like {"reason": "bad ECC on GPU 3"}; the only field is reason'


class CordonWrites(Protocol):
    async def cordon(self, node_id: str, reason: str, by: str) -> CordonRecord:
        """Record the cordon durably (state topic first), then apply it. Raises NotLeader, UnknownNode."""

    async def uncordon(self, node_id: str, reason: str, by: str) -> CordonRecord: ...


class CordonRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Body of ``POST /v1/nodes/{id}/cordon|uncordon``: why (who asks is the caller's token)."""

    reason: Annotated[str, msgspec.Meta(max_length=MAX_REASON)] = ""


def routes(cordons: CordonWrites) -> list[web.RouteDef]:
    async def write(request: web.Request, cordoned: bool) -> web.Response:
        node_id = request.match_info["node_id"]
        body = await read_json(request, CordonRequest, _HINT)
        verb = "cordoned" if cordoned else "uncordoned"
        reason = body.reason.strip() or f"{verb} by operator"
        action = cordons.cordon if cordoned else cordons.uncordon
        record = await action(node_id, reason, caller(request).by)
        return json_response(CordonAnswer(node_id=node_id, cordon=record))

    async def cordon(request: web.Request) -> web.Response:
        return await write(request, True)

    async def uncordon(request: web.Request) -> web.Response:
        return await write(request, False)

    return [web.post("/v1/nodes/{node_id}/cordon", cordon), web.post("/v1/nodes/{node_id}/uncordon", uncordon)]
