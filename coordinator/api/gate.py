"""The API's one gate: authenticate, authorise, check a write's content type, audit the write.

In order, for every request but the open ones (``/healthz``, ``/openapi.json``): a bearer token (401 with
``WWW-Authenticate: Bearer`` without one or with a bad one), the caller on the request (``caller(request)``),
the role the route needs (403 naming it). A write (any method but GET, HEAD, OPTIONS) then needs
``Content-Type: application/json`` or a type its route declares (415, even for an empty body: a browser can
send ``text/plain`` or a form across origins without asking, but not JSON), and is audited: the attempt
before the route runs (503 and no write if Kafka does not take it), the result after. A 403 or 415 is
audited too, as refused. Requests that match no route need a valid token and get their 404/405; they change
nothing and are not audited. A GET of a route whose component declares a ``session`` (the dashboard) may
present that session's cookie instead of a token; a write never can.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import msgspec
import structlog
from aiohttp import web

from myolo.coordinator.api.audit import AuditLog
from myolo.coordinator.api.auth import (
    SAFE_METHODS,
    Authenticator,
    Caller,
    RoutePolicy,
    Unauthorized,
    registered,
    require,
    set_caller,
    unauthorized,
)
from myolo.coordinator.api.errors import Handler, error_response, status_of
from myolo.coordinator.core.errors import Refusal, Unavailable, Unsupported

log = structlog.get_logger("myolo.coordinator.api")
JSON = "application/json"


@dataclass(frozen=True)
class Security:
    """What the gate needs: who a token is, and where writes are recorded."""

    authenticate: Authenticator
    audit: AuditLog


Session = Callable[[web.Request], "tuple[str, str] | None"]  # a browser session: (token name, role) or None


@dataclass(frozen=True)
class Rules:
    policy: RoutePolicy
    body_types: Mapping[tuple[str, str], frozenset[str]]
    sessions: Mapping[tuple[str, str], Session] = field(default_factory=dict)  # GET/HEAD routes only


RULES = web.AppKey("myolo_rules", Rules)
SECURITY = web.AppKey("myolo_security", Security)


def install(
    app: web.Application,
    admin_routes: Iterable[tuple[str, str]],
    body_types: Mapping,
    open_routes: Iterable[tuple[str, str]] = (),
    sessions: Mapping[tuple[str, str], Session] | None = None,
) -> None:
    """Check the components' declarations against the routes (a typo is an error at start, not an open door).
    ``sessions`` names the routes a browser's session cookie may read instead of a token: never a write."""
    policy = RoutePolicy(admin_routes, app, open_routes)
    unknown = sorted(set(body_types) - registered(app))
    if unknown:
        raise ValueError(f"body_types name routes that are not registered: {unknown}")
    sessions = dict(sessions or {})
    writes = sorted(r for r in sessions if r[0] not in SAFE_METHODS)
    if writes:
        raise ValueError(f"a session may only read: {writes}")
    app[RULES] = Rules(policy, dict(body_types), sessions)


def _refusal(exc: Refusal) -> web.Response:
    headers = {"WWW-Authenticate": exc.challenge} if isinstance(exc, Unauthorized) else None
    return error_response(exc, headers)


def check_body_type(request: web.Request, accepted: frozenset[str]) -> None:
    if request.content_type in accepted:
        return
    sent = request.headers.get("Content-Type") or "no Content-Type"
    raise Unsupported(
        f"{request.method} {request.path} takes {', '.join(sorted(accepted))}, not {sent}",
        field="Content-Type",
        hint="send a JSON body with Content-Type: application/json ({} when there is nothing to say)",
    )


def _error_of(response: web.StreamResponse) -> str | None:
    body = getattr(response, "body", None)
    if response.status < 400 or not isinstance(body, bytes):
        return None
    try:
        error = msgspec.json.decode(body).get("error")
    except (msgspec.DecodeError, AttributeError):
        return None
    return str(error)[:500] if error else None


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    rules, security = request.app[RULES], request.app[SECURITY]
    if rules.policy.is_open(request):
        return await handler(request)
    session = rules.sessions.get(rules.policy.route(request) or ("", ""))
    if session is not None and "Authorization" not in request.headers:
        return await _read_in_session(request, handler, session, rules)
    try:
        who = security.authenticate(request)
    except Unauthorized as exc:
        log.info("API request without a valid token", method=request.method, path=request.path, remote=request.remote)
        return _refusal(exc)
    except Refusal as exc:
        return _refusal(exc)
    set_caller(request, who)
    route = rules.policy.route(request)
    if route is None:  # no such path or method: any valid token learns that (404/405), nothing happens
        return await handler(request)
    if request.method in SAFE_METHODS:
        try:
            require(who, rules.policy.needs(*route), request.method, request.path)
        except Refusal as exc:
            return _refusal(exc)
        return await handler(request)
    return await _write(request, handler, security.audit, who, route, rules)


async def _read_in_session(
    request: web.Request, handler: Handler, session: Session, rules: Rules
) -> web.StreamResponse:
    """A browser's read with its session cookie (the routes that accept one are GET/HEAD only)."""
    found = session(request)
    if found is None:
        return _refusal(unauthorized("no session: log in at /ui/login"))
    who = Caller(*found)  # type: ignore[arg-type]
    set_caller(request, who)
    route = rules.policy.route(request)
    try:
        require(who, rules.policy.needs(*route) if route else "admin", request.method, request.path)
    except Refusal as exc:
        return _refusal(exc)
    return await handler(request)


async def _write(
    request: web.Request, handler: Handler, audit: AuditLog, who: Caller, route: tuple[str, str], rules: Rules
) -> web.StreamResponse:
    rec = audit.record(request, who, route[1])
    try:
        require(who, rules.policy.needs(*route), request.method, request.path)
        check_body_type(request, rules.body_types.get(route, frozenset({JSON})))
        await audit.attempt(rec)
    except Refusal as exc:
        if not isinstance(exc, Unavailable):  # the attempt's own record failing: nothing to add
            await audit.result(rec, request, status_of(exc), exc.error)
        return _refusal(exc)
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # a redirect raised past the JSON errors
        await audit.result(rec, request, exc.status)
        raise
    except asyncio.CancelledError:
        asyncio.get_running_loop().create_task(audit.result(rec, request, 499, "the client went away"))
        raise
    await audit.result(rec, request, response.status, _error_of(response))
    return response
