"""Build the aiohttp application of a coordinator: the core's routes plus each component's.

``create_app(core, parts)`` is all a coordinator process needs; ``serve`` starts it on the running event loop
and returns the runner, which the caller cleans up on shutdown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from coordinator.api import openapi, routes
from coordinator.api.errors import json_errors
from coordinator.core.component import RouteSet


def _served_by(instance_id: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(request: web.Request, handler) -> web.StreamResponse:
        response = await handler(request)
        response.headers["X-Myolo-Coordinator"] = instance_id
        return response

    return middleware


def create_app(core: routes.CoreView, parts: Sequence[RouteSet]) -> web.Application:
    """The API of one coordinator (reads from its components; writes only when it leads)."""
    document = openapi.assemble(p.openapi for p in parts if p.openapi is not None)
    app = web.Application(middlewares=[_served_by(core.instance_id), json_errors], client_max_size=64 * 1024)
    app.add_routes(routes.routes(core, document, [p.health for p in parts]))
    for part in parts:
        app.add_routes(part.routes)
    return app


async def serve(
    core: routes.CoreView, parts: Sequence[RouteSet], host: str = "127.0.0.1", port: int = 0
) -> tuple[web.AppRunner, int]:
    """Start the API; returns the runner (``await runner.cleanup()`` stops it) and the bound port."""
    runner = web.AppRunner(create_app(core, parts), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, bound
