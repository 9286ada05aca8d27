"""Refusals as JSON ``{error, field?, hint?}`` with their HTTP status: the one place a refusal becomes a status.

A middleware turns every ``Refusal`` a route or a component raises, aiohttp's own errors (unknown path, wrong
method) and unexpected exceptions into the same shape, so a client never has to parse an HTML error page. A
write that reaches a standby (``NotLeader``) is redirected with ``307 Temporary Redirect`` (method and body
kept) to the same path on the leader's API, so ``curl -L`` and ``myoloctl`` work whichever coordinator they ask
first. ``refusal_of`` reads an error answer back into its refusal, for ``myoloctl``; aiohttp is imported only
by the server's functions, so the command line does not load it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog

from myolo.coordinator.api.answers import ErrorAnswer
from myolo.coordinator.core.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    NotLeader,
    Refusal,
    TooLarge,
    Unauthenticated,
    Unavailable,
    Unsupported,
    by_kind,
)

if TYPE_CHECKING:
    from aiohttp import web

log = structlog.get_logger("myolo.coordinator.api")
Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]

HTTP_STATUS: dict[type[Refusal], int] = {
    Invalid: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    Unsupported: 415,
    Unavailable: 503,
}
_KIND = {status: kind for kind, status in HTTP_STATUS.items()}
_HINTS = {
    404: "the API's paths are listed in /openapi.json",
    405: "see /openapi.json for the methods each path takes",
}


def status_of(refusal: Refusal) -> int:
    """The HTTP status of a refusal: that of the first kind in its class's ancestry (a bare Refusal is a 400)."""
    status = by_kind(refusal, HTTP_STATUS)
    return 400 if status is None else status


def refusal_of(status: int, body: Any) -> Refusal:
    """The refusal an error answer stands for: its kind from the status (a bare ``Refusal`` for a status that is
    no kind's, e.g. a 405 or a 500), its words from the JSON body when it has them."""
    kind = _KIND.get(status, Refusal)
    if not isinstance(body, dict) or "error" not in body:
        return kind(f"HTTP {status}", status=status)
    field, hint = body.get("field"), body.get("hint")
    return kind(
        str(body["error"]),
        field=field if isinstance(field, str) else None,
        hint=hint if isinstance(hint, str) else None,
        status=status,
    )


def error_response(refusal: Refusal, headers: dict[str, str] | None = None) -> web.Response:
    from myolo.coordinator.api.respond import json_response

    status = refusal.status or status_of(refusal)
    return json_response(ErrorAnswer(error=refusal.error, field=refusal.field, hint=refusal.hint), status, headers)


async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The middleware: every failure of a route answered as JSON with its status."""
    from aiohttp import web

    try:
        return await handler(request)
    except NotLeader as exc:
        return to_leader(request, exc.leader_url)
    except Refusal as exc:
        return error_response(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "location")}
        error = f"{exc.reason}: {request.method} {request.path}"
        return error_response(Refusal(error, hint=_HINTS.get(exc.status), status=exc.status), headers)
    except Exception as exc:
        log.exception("api handler failed", path=request.path)
        internal = f"internal error: {type(exc).__name__}: {exc}"
        return error_response(Refusal(internal, hint="see the coordinator's log", status=500))


json_errors.__middleware_version__ = 1  # type: ignore[attr-defined]  # what @web.middleware sets


def to_leader(request: web.Request, leader_url: str | None) -> web.Response:
    """307 to the same path on the leader, or 503 with Retry-After while no leader is known."""
    from myolo.coordinator.api.respond import json_response

    if not leader_url:
        unknown = ErrorAnswer(error="no leader is known right now", hint="a leader is elected within seconds; retry")
        return json_response(unknown, 503, {"Retry-After": "1"})
    location = leader_url.rstrip("/") + request.path_qs
    body = ErrorAnswer(error="this coordinator is a standby; writes go to the leader", hint=location)
    return json_response(body, 307, {"Location": location})
