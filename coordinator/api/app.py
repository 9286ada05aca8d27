"""Build the aiohttp application of a coordinator: the core's routes plus each component's.

``create_app(core, parts, security)`` is all a coordinator process needs; ``serve`` starts it on the running
event loop (with TLS when given a context) and returns the runner, which the caller cleans up on shutdown.
Every request passes the gate (``guard``: tokens, roles, content types, audit) before the JSON error middleware
and the routes.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from myolo.coordinator.api import openapi, routes
from myolo.coordinator.api.body import MAX_BODY
from myolo.coordinator.api.errors import json_errors
from myolo.coordinator.api.gate import SECURITY, Security, guard, install
from myolo.coordinator.api.requests import RequestCounts
from myolo.coordinator.core.component import RouteSet


def _served_by(instance_id: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(request: web.Request, handler) -> web.StreamResponse:
        response = await handler(request)
        response.headers["X-Myolo-Coordinator"] = instance_id
        return response

    return middleware


def create_app(
    core: routes.CoreView, parts: Sequence[RouteSet], security: Security, requests: RequestCounts | None = None
) -> web.Application:
    """The API of one coordinator (reads from its components; writes only when it leads). ``requests``
    counts every request answered (``myolo_api_requests_total``)."""
    document = openapi.assemble(p.openapi for p in parts if p.openapi is not None)
    counting = [requests.middleware()] if requests is not None else []
    middlewares = [_served_by(core.instance_id), *counting, guard, json_errors]
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY)
    app[SECURITY] = security
    app.add_routes(routes.routes(core, document, [p.health for p in parts]))
    for part in parts:
        app.add_routes(part.routes)
    install(
        app,
        [r for p in parts for r in p.admin_routes],
        {k: v for p in parts for k, v in p.body_types.items()},
        [r for p in parts for r in p.open_routes],
        {(r.method, r.path): p.session for p in parts if p.session is not None for r in p.routes if r.method == "GET"},
    )
    return app


SHUTDOWN_GRACE_S = 2.0
"""How long requests in flight may finish when the API stops. A dashboard's live feed never finishes by itself
(it would hold a stopping coordinator for aiohttp's default of 60 s): it is cut after this."""


async def serve(
    core: routes.CoreView,
    parts: Sequence[RouteSet],
    security: Security,
    host: str = "127.0.0.1",
    port: int = 0,
    ssl_context: ssl.SSLContext | None = None,
    requests: RequestCounts | None = None,
) -> tuple[web.AppRunner, int]:
    """Start the API; returns the runner (``await runner.cleanup()`` stops it) and the bound port."""
    runner = web.AppRunner(
        create_app(core, parts, security, requests), access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, bound
