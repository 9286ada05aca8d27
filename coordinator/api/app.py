"""Build the aiohttp application for a coordinator and serve it on a port.

``create_app(service)`` is all a coordinator process needs; ``serve(service, host, port)`` starts it on
the running event loop and returns the runner, which the caller cleans up on shutdown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from coordinator.api.errors import json_errors
from coordinator.api.routes import OPENAPI, SERVICE, routes
from coordinator.api.service import FleetService

OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")


@cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3 description of this API (coordinator/api/openapi.yaml), parsed once."""
    return yaml.safe_load(OPENAPI_PATH.read_text())


def _served_by(service: FleetService) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(request: web.Request, handler) -> web.StreamResponse:
        response = await handler(request)
        response.headers["X-Myolo-Coordinator"] = service.instance_id
        return response

    return middleware


def create_app(service: FleetService) -> web.Application:
    """The API of one coordinator (reads from its fleet view; writes only when it leads)."""
    app = web.Application(middlewares=[_served_by(service), json_errors], client_max_size=64 * 1024)
    app[SERVICE] = service
    app[OPENAPI] = openapi_document()
    app.add_routes(routes)
    return app


async def serve(service: FleetService, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Start the API; returns the runner (``await runner.cleanup()`` stops it) and the bound port."""
    runner = web.AppRunner(create_app(service), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1] if site._server and site._server.sockets else port
    return runner, bound
