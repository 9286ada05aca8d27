"""Errors as JSON ``{error, field?, hint?}`` with the right status, for every failure the API can have.

A middleware turns aiohttp's own errors (unknown path, wrong method), the core's errors and unexpected
exceptions into the same shape, so a client never has to parse an HTML error page. A write that reaches a
standby (``NotLeader``) is redirected with ``307 Temporary Redirect`` (method and body kept) to the same path
on the leader's API, so ``curl -L`` and ``myoloctl`` work whichever coordinator they ask first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from coordinator.core.errors import NotLeader, UnknownNode

log = structlog.get_logger("myolo.coordinator.api")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """A failure with a status and words a person can act on."""

    def __init__(self, status: int, error: str, *, field: str | None = None, hint: str | None = None) -> None:
        super().__init__(error)
        self.status, self.error, self.field, self.hint = status, error, field, hint


def error_body(error: str, field: str | None = None, hint: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": error}
    if field is not None:
        body["field"] = field
    if hint is not None:
        body["hint"] = hint
    return body


def error_response(exc: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(error_body(exc.error, exc.field, exc.hint), status=exc.status, headers=headers)


_HINTS = {
    404: "the API's paths are listed in /openapi.json",
    405: "see /openapi.json for the methods each path takes",
}


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc)
    except NotLeader as exc:
        return to_leader(request, exc.leader_url)
    except UnknownNode as exc:
        return error_response(
            ApiError(404, f"node {exc.node_id!r} is not known", field="id", hint="list the nodes with GET /v1/nodes")
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "location")}
        error = f"{exc.reason}: {request.method} {request.path}"
        return error_response(ApiError(exc.status, error, hint=_HINTS.get(exc.status)), headers)
    except Exception as exc:
        log.exception("api handler failed", path=request.path)
        return error_response(
            ApiError(500, f"internal error: {type(exc).__name__}: {exc}", hint="see the coordinator's log")
        )


def to_leader(request: web.Request, leader_url: str | None) -> web.Response:
    """307 to the same path on the leader, or 503 with Retry-After while no leader is known."""
    if not leader_url:
        return web.json_response(
            error_body("no leader is known right now", hint="a leader is elected within seconds; retry"),
            status=503,
            headers={"Retry-After": "1"},
        )
    location = leader_url.rstrip("/") + request.path_qs
    body = error_body("this coordinator is a standby; writes go to the leader", hint=location)
    return web.json_response(body, status=307, headers={"Location": location})
