"""The API's handlers: fleet reads on any coordinator, cordon/uncordon on the leader (others answer 307).

A write that reaches a standby is redirected with ``307 Temporary Redirect`` (method and body kept) to the
same path on the leader's API, so ``curl -L`` and ``myoloctl`` work whichever coordinator they ask first.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from aiohttp import web

from coordinator.api import views
from coordinator.api.errors import ApiError, error_body
from coordinator.api.service import FleetService, NotLeader, UnknownNode

SERVICE = web.AppKey("service", FleetService)
OPENAPI = web.AppKey("openapi", dict)
routes = web.RouteTableDef()

MAX_REASON = 500
_FIELD = re.compile(r"at `\$\.([A-Za-z_][\w]*)")
_UNKNOWN = re.compile(r"unknown field `([^`]+)`")


class CordonRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Body of ``POST /v1/nodes/{id}/cordon|uncordon``: why, and (optionally) who asks."""

    reason: Annotated[str, msgspec.Meta(max_length=MAX_REASON)] = ""
    by: Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[\w.@:+-]+$")] | None = None


def _service(request: web.Request) -> FleetService:
    return request.app[SERVICE]


def _node_or_404(service: FleetService, node_id: str):
    node = service.node(node_id)
    if node is None:
        raise _unknown(node_id)
    return node


def _unknown(node_id: str) -> ApiError:
    return ApiError(404, f"node {node_id!r} is not known", field="id", hint="list the nodes with GET /v1/nodes")


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    service = _service(request)
    ready = service.started.is_set()
    body = {
        "status": "ok" if ready else "starting",
        "instance_id": service.instance_id,
        "role": "leader" if service.is_leader else "standby",
        "nodes": len(service.nodes()),
    }
    return web.json_response(body, status=200 if ready else 503)


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.json_response(request.app[OPENAPI])


@routes.get("/v1/nodes")
async def list_nodes(request: web.Request) -> web.Response:
    service = _service(request)
    now = service.clock.now()
    items = [views.node_summary(n, now) for n in sorted(service.nodes(), key=lambda n: n.node_id)]
    return web.json_response({"now": now, "items": items})


@routes.get("/v1/nodes/{node_id}")
async def get_node(request: web.Request) -> web.Response:
    service = _service(request)
    node = _node_or_404(service, request.match_info["node_id"])
    return web.json_response(views.node_json(node, service.clock.now()))


@routes.get("/v1/gpus")
async def list_gpus(request: web.Request) -> web.Response:
    service = _service(request)
    nodes = sorted(service.nodes(), key=lambda n: n.node_id)
    return web.json_response({"now": service.clock.now(), "items": views.gpu_rows(nodes)})


@routes.get("/v1/leader")
async def leader(request: web.Request) -> web.Response:
    service = _service(request)
    return web.json_response(views.leader_json(service.leader_info(), service.instance_id, service.is_leader))


@routes.post("/v1/nodes/{node_id}/cordon")
async def cordon(request: web.Request) -> web.Response:
    return await _write(request, cordoned=True)


@routes.post("/v1/nodes/{node_id}/uncordon")
async def uncordon(request: web.Request) -> web.Response:
    return await _write(request, cordoned=False)


async def _write(request: web.Request, *, cordoned: bool) -> web.Response:
    service = _service(request)
    node_id = request.match_info["node_id"]
    body = parse_cordon_request(await request.read())
    verb = "cordoned" if cordoned else "uncordoned"
    reason = body.reason.strip() or f"{verb} by operator"
    by = f"operator:{body.by or 'api'}"
    action = service.cordon if cordoned else service.uncordon
    try:
        record = await action(node_id, reason, by)
    except NotLeader as exc:
        return _redirect(request, exc.leader_url)
    except UnknownNode:
        raise _unknown(node_id) from None
    return web.json_response({"node_id": node_id, "cordon": msgspec.to_builtins(record)})


def parse_cordon_request(raw: bytes) -> CordonRequest:
    """The JSON body, or ApiError 400 naming the field at fault (an empty body means all defaults)."""
    if not raw.strip():
        return CordonRequest()
    try:
        return msgspec.json.decode(raw, type=CordonRequest)
    except msgspec.ValidationError as exc:
        text = str(exc)
        field = _UNKNOWN.search(text) or _FIELD.search(text)
        name = field.group(1) if field else None
        hint = 'send a JSON object like {"reason": "bad ECC on GPU 3"}; allowed fields: reason, by'
        raise ApiError(400, f"invalid request body: {text}", field=name, hint=hint) from None
    except msgspec.DecodeError as exc:
        raise ApiError(400, f"request body is not JSON: {exc}", hint="send Content-Type: application/json") from None


def _redirect(request: web.Request, leader_url: str | None) -> web.Response:
    if not leader_url:
        return web.json_response(
            error_body("no leader is known right now", hint="a leader is elected within seconds; retry"),
            status=503,
            headers={"Retry-After": "1"},
        )
    location = leader_url.rstrip("/") + request.path_qs
    body: dict[str, Any] = error_body("this coordinator is a standby; writes go to the leader", hint=location)
    return web.json_response(body, status=307, headers={"Location": location})
