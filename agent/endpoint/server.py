"""The health endpoint: ``GET /healthz`` (cheap, the last known state) and ``POST /healthcheck`` (reads the
GPUs afresh first), both answering ``{"status": "ok"|"warn"|"fail", "checks": {...}}`` (the tree's one health scale).

``curl -X POST http://localhost:8080/healthcheck | jq .status`` is the operator's one-liner. The HTTP code is
200 for ok and warn and 503 for fail, so a load balancer or a probe that only reads codes still acts
on a failing node. The endpoint only reads: ``POST /healthcheck`` changes nothing but the freshness of the GPU
reading, and at most once per ``[health] active_min_interval_s`` (throttle.py; the ``X-Myolo-Gpu-Read``
header says whether this answer read the GPUs or how old the read it shows is). Request bodies are not read
and are refused above 4 KiB.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import msgspec
import structlog
from aiohttp import web

from myolo.agent.endpoint.checks import HealthReport
from myolo.agent.endpoint.throttle import ActiveAnswer

log = structlog.get_logger("myolo.agent.endpoint")
_ENC = msgspec.json.Encoder()
_WILDCARDS = ("", "0.0.0.0", "::", "[::]")
MAX_BODY = 4096  # nothing it serves takes a body


class HealthServer:
    """aiohttp on ``host:port``; ``port=0`` picks a free port (tests), readable from :attr:`port`.

    ``routes``: more of the agent's routes on the same listener (the workers' logs). ``advertise``: the node's
    address, which :attr:`url` names instead of a wildcard ``host`` (``0.0.0.0``) no other node can reach."""

    def __init__(
        self,
        current: Callable[[], HealthReport],
        active: Callable[[], Awaitable[ActiveAnswer]],
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
        routes: Sequence[web.RouteDef] = (),
        advertise: str | None = None,
    ) -> None:
        self._current = current
        self._active = active
        self.host = host
        self.port = port
        self.advertise = advertise
        self._routes = list(routes)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_get("/healthz", self._get)
        app.router.add_post("/healthcheck", self._post)
        app.add_routes(self._routes)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            self._runner = None
            raise OSError(
                exc.errno,
                f"health endpoint cannot listen on {self.host}:{self.port}: {exc.strerror}; "
                "set health.port (or MYOLO_HEALTH_PORT) to a free port, or health.enabled = false",
            ) from None
        server = site._server  # the bound socket tells the real port when 0 was asked for
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        log.info("health endpoint listening", url=f"{self.url}/healthz")

    @property
    def url(self) -> str:
        """Where the endpoint answers (``/healthz``, ``/healthcheck`` below it); the real port once started."""
        host = self.advertise if self.advertise and self.host in _WILDCARDS else self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # an IPv6 address
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _get(self, _request: web.Request) -> web.Response:
        return _respond(self._current())

    async def _post(self, request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > MAX_BODY:
            raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=request.content_length)
        answer = await self._active()
        read = "fresh" if answer.fresh else f"{answer.read_age_s:.1f}s old"
        return _respond(answer.report, {"X-Myolo-Gpu-Read": read})


def _respond(rep: HealthReport, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=_ENC.encode(rep),
        status=503 if rep.status == "fail" else 200,
        content_type="application/json",
        headers=headers,
    )
