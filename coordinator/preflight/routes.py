"""``POST /v1/preflight``: run the pre-upgrade checklist (leader only: a standby's answer is a 307 to the leader,
made by the API's error middleware from ``NotLeader``). The answer is the report, 200 whether checks passed or
not (``ok`` says); errors are about the request: a wrong field (400), an unknown node (404), a run already
going on or no node to check (409)."""

from __future__ import annotations

import msgspec
from aiohttp import web

from coordinator.api.auth import caller
from coordinator.api.errors import ApiError
from coordinator.preflight.interface import PreflightRefused, Preflights, UnknownPreflightNode
from coordinator.preflight.records import PreflightRequest
from events.errors import validation_problem

PATH = "/v1/preflight"
_HINT = (
    'send e.g. {"nodes": ["gpu-01"], "checks": ["driver", "memory", "data", "nccl"], "min_driver": "515.65.01", '
    '"min_free_memory_pct": 10, "min_busbw_gbps": 10, "timeout_s": 120}; every field is optional'
)


def parse_request(raw: bytes) -> PreflightRequest:
    """The JSON body (empty: every default), or ApiError 400 naming the field at fault."""
    if not raw.strip():
        return PreflightRequest()
    try:
        return msgspec.json.decode(raw, type=PreflightRequest)
    except msgspec.ValidationError as exc:
        problem = validation_problem(exc)
        field = problem.field.lstrip(".") or None
        raise ApiError(400, f"invalid request body: {problem.message}", field=field, hint=_HINT) from None
    except msgspec.DecodeError as exc:
        raise ApiError(400, f"request body is not JSON: {exc}", hint=_HINT) from None


def routes(preflights: Preflights) -> list[web.RouteDef]:
    async def run(request: web.Request) -> web.Response:
        body = parse_request(await request.read())
        try:
            report = await preflights.preflight(body, caller(request).by)
        except UnknownPreflightNode as exc:
            raise ApiError(404, str(exc), field=exc.field, hint="`myoloctl get nodes` lists the nodes by id") from None
        except PreflightRefused as exc:
            raise ApiError(409, exc.reason, field=exc.field, hint=exc.hint) from None
        return web.json_response(msgspec.to_builtins(report))

    return [web.post(PATH, run)]
