"""``POST /v1/preflight``: run the pre-upgrade checklist (leader only: a standby's answer is a 307 to the leader,
made by the API's error middleware from ``NotLeader``). The answer is the report, 200 whether checks passed or
not (``ok`` says); errors are about the request: a wrong field (400), an unknown node (404), a run already
going on or no node to check (409)."""

from __future__ import annotations

from aiohttp import web

from myolo.coordinator.api.auth import caller
from myolo.coordinator.api.body import read_json
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.preflight.api import Preflights
from myolo.coordinator.preflight.records import PreflightRequest

PATH = "/v1/preflight"
_HINT = (
    'send e.g. {"nodes": ["gpu-01"], "checks": ["driver", "memory", "cuda", "data"], "min_driver": "515.65.01", '
    '"min_free_memory_pct": 10, "min_busbw_gbps": 10, "min_cuda": "12.1", "timeout_s": 120}; every field is optional'
)


def routes(preflights: Preflights) -> list[web.RouteDef]:
    async def run(request: web.Request) -> web.Response:
        body = await read_json(request, PreflightRequest, _HINT)
        report = await preflights.preflight(body, caller(request).by)
        return json_response(report)

    return [web.post(PATH, run)]
