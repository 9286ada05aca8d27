"""``GET /v1/profiles/{profile_id}`` (what the profile is and how it went, JSON) and
``GET /v1/profiles/{profile_id}/folded`` (its folded stacks, once done), on the agent's endpoint, for
``myoloctl profile``. The id is checked before any file is named: only letters, digits and ``._-``."""

from __future__ import annotations

import re

import msgspec
from aiohttp import web

from myolo.agent.profile.profiler import Profiler

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENC = msgspec.json.Encoder()


def _error(status: int, message: str, field: str | None = None) -> web.Response:
    return web.Response(
        status=status, body=_ENC.encode({"error": message, "field": field}), content_type="application/json"
    )


def routes(profiler: Profiler | None) -> list[web.RouteDef]:
    def lookup(request: web.Request):
        profile_id = request.match_info["profile_id"]
        if not _ID.match(profile_id):
            return None, _error(400, "a profile id is letters, digits and ._- (at most 64)", "profile_id")
        rec = profiler.record(profile_id) if profiler is not None else None
        if rec is None:
            why = "profiles are off on this node" if profiler is None else f"no profile {profile_id!r} on this node"
            return None, _error(404, why, "profile_id")
        return rec, None

    async def status(request: web.Request) -> web.Response:
        rec, refused = lookup(request)
        if refused is not None:
            return refused
        return web.Response(body=_ENC.encode(rec), content_type="application/json")

    async def folded(request: web.Request) -> web.StreamResponse:
        rec, refused = lookup(request)
        if refused is not None:
            return refused
        if rec.state == "running":
            return _error(409, f"profile {rec.profile_id} is still running ({rec.duration_s:g} s asked)", "state")
        if rec.state == "failed":
            return _error(404, f"profile {rec.profile_id} failed: {rec.error}", "state")
        path = profiler.data_path(rec.profile_id)  # type: ignore[union-attr]
        if not path.exists():
            return _error(404, f"profile {rec.profile_id}'s stacks were removed (newer ones replace old)", "profile_id")
        return web.FileResponse(path, headers={"Content-Type": "text/plain; charset=utf-8"})

    return [web.get("/v1/profiles/{profile_id}", status), web.get("/v1/profiles/{profile_id}/folded", folded)]
