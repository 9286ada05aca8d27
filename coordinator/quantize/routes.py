"""Quantization over HTTP: ask for one of a version, list them, read one. Asking is the leader's (a standby
answers 307); an operator may ask (the result is a new version, never champion unless the model's
``quantize_margin`` says so, which only an admin sets)."""

from __future__ import annotations

from aiohttp import web

from myolo.coordinator.api.auth import caller
from myolo.coordinator.api.body import read_json
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.core.errors import Invalid
from myolo.coordinator.quantize.answers import RunList
from myolo.coordinator.quantize.api import Quantizations
from myolo.coordinator.quantize.interface import UnknownRun
from myolo.coordinator.quantize.records import QuantizeRequest

ASK = "/v1/models/{model}/versions/{version}/quantize"
LIST = "/v1/quantizations"
ONE = "/v1/quantizations/{name}"
_HINT = (
    'send e.g. {"bits": 4, "scheme": "gptq", "group_size": 64, "calib": "/data/calib.bin", "eval": "/data/heldout.bin"}'
)


def routes(q: Quantizations) -> list[web.RouteDef]:
    async def ask(request: web.Request) -> web.Response:
        raw = request.match_info["version"]
        if not raw.isdigit() or int(raw) < 1:
            raise Invalid(f"version: {raw!r} is not a version number (1, 2, ...)", field="version")
        body = await read_json(request, QuantizeRequest, _HINT)
        run, created = await q.quantize(request.match_info["model"], int(raw), body, caller(request).by)
        return json_response(run, 202 if created else 200)

    async def list_runs(request: web.Request) -> web.Response:
        return json_response(RunList(items=list(q.runs())))

    async def get_run(request: web.Request) -> web.Response:
        run = q.run(request.match_info["name"])
        if run is None:
            raise UnknownRun(request.match_info["name"])
        return json_response(run)

    return [web.post(ASK, ask), web.get(LIST, list_runs), web.get(ONE, get_run)]
