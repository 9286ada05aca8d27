"""The dashboard's HTTP routes, under ``/ui``.

Open (they hold no data): the login form and its POST, the logout, the page shell ``/ui/<page>`` and the static
files. Behind a session cookie (or a bearer token, for scripts): ``/ui/api/catalogue``, ``/ui/api/pages/<name>``
(one page's data, a msgspec Struct as JSON) and ``/ui/api/events`` (the live feed). Nothing here writes.
"""

from __future__ import annotations

from typing import Protocol

import msgspec
import structlog
from aiohttp import web

from myolo.common.clock import Clock, sleep_or_wake
from myolo.coordinator.api.auth import caller
from myolo.coordinator.api.gate import SECURITY
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.api.tokens import RANK
from myolo.coordinator.core.dashboard import Boards
from myolo.coordinator.core.errors import NotFound, Refusal, Unavailable
from myolo.coordinator.ui import views
from myolo.coordinator.ui.assets import HEADERS, Asset
from myolo.coordinator.ui.config import UiConfig
from myolo.coordinator.ui.sessions import COOKIE, SessionTable, cleared_cookie, cookie_header
from myolo.coordinator.ui.sse import KEEPALIVE, Feed, frame

log = structlog.get_logger("myolo.coordinator.ui")
MAX_FORM = 4096


class UiState(Protocol):
    """What the routes read of the dashboard component."""

    cfg: UiConfig
    clock: Clock
    boards: Boards
    sessions: SessionTable
    feed: Feed
    assets: dict[str, Asset]

    def read(self, page: str, key: str | None) -> msgspec.Struct | None: ...


def _file(asset: Asset, status: int = 200) -> web.Response:
    return web.Response(body=asset.body, status=status, headers={**HEADERS, "Content-Type": asset.content_type})


def _see(location: str, cookie: str | None = None) -> web.Response:
    headers = {**HEADERS, "Location": location}
    if cookie is not None:
        headers["Set-Cookie"] = cookie
    return web.Response(status=303, headers=headers)


def routes(ui: UiState) -> list[web.RouteDef]:
    async def root(request: web.Request) -> web.Response:
        return _see("/ui/fleet")

    async def login_form(request: web.Request) -> web.Response:
        page = ui.assets["login.html"]
        if "failed" in request.query:  # a fixed message, nothing of the request is echoed
            page = Asset(page.body.replace(b'id="failed" hidden', b'id="failed"'), page.content_type)
        return _file(page)

    async def login(request: web.Request) -> web.Response:
        """The form's token, checked like a bearer token; a session of the viewer role on success."""
        if request.content_length is not None and request.content_length > MAX_FORM:
            return _see("/ui/login?failed")
        form = await request.post()
        token = form.get("token")
        token = token.strip() if isinstance(token, str) else ""
        try:
            who = request.app[SECURITY].authenticate.token_caller(token)
        except Refusal:
            log.info("dashboard login refused", remote=request.remote)
            return _see("/ui/login?failed")
        if RANK[who.role] < RANK["viewer"]:
            log.info("dashboard login refused", remote=request.remote, token=who.name, role=who.role)
            return _see("/ui/login?failed")
        sid = ui.sessions.open(who.name)
        log.info("dashboard login", token=who.name, sessions=len(ui.sessions))
        return _see("/ui/fleet", cookie_header(sid, ui.cfg.session_ttl_s, request.secure))

    async def logout(request: web.Request) -> web.Response:
        ui.sessions.close(request.cookies.get(COOKIE))
        return _see("/ui/login", cleared_cookie(request.secure))

    async def static(request: web.Request) -> web.Response:
        asset = ui.assets.get(request.match_info["file"])
        if asset is None:
            raise NotFound(f"no file {request.match_info['file']!r} in the dashboard", field="file")
        return _file(asset)

    async def shell(request: web.Request) -> web.Response:
        page = request.match_info["page"]
        if ui.boards.panel(page) is None:
            return _file(ui.assets["index.html"], status=404)
        return _file(ui.assets["index.html"])

    async def catalogue(request: web.Request) -> web.Response:
        return json_response(views.catalogue(ui.boards, caller(request).name), headers=HEADERS)

    async def page(request: web.Request) -> web.Response:
        name, key = request.match_info["name"], request.query.get("key")
        body = ui.read(name, key)
        if body is None:
            raise NotFound(f"no page {name!r}" + (f" for {key!r}" if key else ""), field="name")
        return json_response(body, headers=HEADERS)

    async def events(request: web.Request) -> web.StreamResponse:
        stream = ui.feed.join()
        if stream is None:
            raise Unavailable(f"{ui.feed.limit} browsers follow the live feed already (ui.max_streams)")
        sid = request.cookies.get(COOKIE)
        resp = web.StreamResponse(headers={**HEADERS, "Content-Type": "text/event-stream"})
        try:
            await resp.prepare(request)
            await resp.write(b"retry: 3000\n\n" + frame("hello", {"coalesce_s": ui.cfg.coalesce_s}))
            while True:
                if not await sleep_or_wake(ui.clock, ui.cfg.keepalive_s, stream.wake):
                    await resp.write(KEEPALIVE)
                else:
                    await ui.clock.sleep(ui.cfg.coalesce_s)  # what else changes meanwhile rides along
                    await resp.write(frame("changed", stream.take()))
                if sid is not None and ui.sessions.who(sid) is None:
                    await resp.write(frame("expired", {}))
                    break
        except (ConnectionResetError, ConnectionError):
            pass  # the browser went away
        finally:
            ui.feed.leave(stream)
        return resp

    return [
        web.get("/ui", root),
        web.get("/ui/login", login_form),
        web.post("/ui/login", login),
        web.post("/ui/logout", logout),
        web.get("/ui/static/{file}", static),
        web.get("/ui/api/catalogue", catalogue),
        web.get("/ui/api/pages/{name}", page),
        web.get("/ui/api/events", events),
        web.get("/ui/{page}", shell),
    ]


OPEN = (
    ("GET", "/ui"),
    ("GET", "/ui/login"),
    ("POST", "/ui/login"),
    ("POST", "/ui/logout"),
    ("GET", "/ui/static/{file}"),
    ("GET", "/ui/{page}"),
)
