"""Rollouts over HTTP: list, read, start (admin: it installs software on every node), and the operator's
pause / resume / abort / undo. Writes are the leader's: a standby answers 307 to it (the API's middleware)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from aiohttp import web

from myolo.coordinator.api.auth import caller
from myolo.coordinator.api.body import read_json
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.core.errors import NotFound
from myolo.coordinator.rollouts.answers import RolloutList, rollout_answer
from myolo.coordinator.rollouts.api import RolloutsAPI
from myolo.coordinator.rollouts.config import Plan
from myolo.events.payloads.commands import Component, Sha256, Version

LIST_PATH = "/v1/rollouts"
ONE_PATH = "/v1/rollouts/{name}"
ACTION_PATH = "/v1/rollouts/{name}/{action}"
ADMIN_ROUTES = (("POST", LIST_PATH),)
ACTIONS = ("pause", "resume", "abort", "undo")
_HINT = 'send {"component": "agent", "version": "4.1.0", "artifact": "/srv/releases/x.whl", "sha256": "<64 hex>"}'


class StartRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    component: Component
    version: Version
    artifact: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
    sha256: Sha256
    plan: Plan | None = None


def routes(api: RolloutsAPI) -> list[web.RouteDef]:
    async def listing(request: web.Request) -> web.Response:
        return json_response(RolloutList(items=[rollout_answer(r) for r in api.rollouts()]))

    async def one(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        rec = api.rollout(name)
        if rec is None:
            raise NotFound(f"no rollout named {name!r}", field="name", hint="GET /v1/rollouts lists them")
        return json_response(rollout_answer(rec))

    async def start(request: web.Request) -> web.Response:
        body = await read_json(request, StartRequest, _HINT)
        rec = await api.start(body.component, body.version, body.artifact, body.sha256, caller(request).by, body.plan)
        return json_response(rollout_answer(rec), 201)

    async def act(request: web.Request) -> web.Response:
        name, action = request.match_info["name"], request.match_info["action"]
        if action not in ACTIONS:
            raise NotFound(f"no action {action!r}; one of {', '.join(ACTIONS)}", field="action")
        rec = await api.act(name, action, caller(request).by)
        return json_response(rollout_answer(rec))

    return [
        web.get(LIST_PATH, listing),
        web.post(LIST_PATH, start),
        web.get(ONE_PATH, one),
        web.post(ACTION_PATH, act),
    ]
