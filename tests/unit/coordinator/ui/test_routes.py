"""The dashboard's routes on the real coordinator (every component, no broker): login by form into an HttpOnly,
SameSite=Strict cookie of the viewer role, the token never in a URL or an answer; a session reads ``/ui/api``
but can never write; sessions expire on the coordinator's clock; every answer carries a strict CSP and
nosniff; the pages' data are the components' Structs; the live feed names what changed."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

from myolo.common.clock import SimClock, SystemClock
from myolo.coordinator.api.app import create_app, serve
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.ui.assets import CSP
from myolo.coordinator.ui.component import Ui
from myolo.events.bus import RecordInfo
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, NodeFault, NodeSample
from tests.support.api_auth import ADMIN, SCRAPER, VIEWER, security, shared
from tests.support.coordinator.offline import offline_coordinator

INFO = RecordInfo("t", 0, 0)
HOSTILE = "<img src=x onerror=alert(1)>"


async def _client(coord: Coordinator) -> TestClient:
    app = create_app(coord, [p for p in (c.api() for c in coord.peers) if p is not None], security())
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[tuple[Coordinator, TestClient, SimClock]]:
    clock = SimClock()
    coord = offline_coordinator(tmp_path, clock=clock)
    client = await _client(coord)
    yield coord, client, clock
    await client.close()


async def _login(client: TestClient, who: str = VIEWER) -> str:
    """Log in with ``who``'s token through the form; returns the session cookie's value."""
    resp = await client.post("/ui/login", data={"token": shared()[1][who]}, allow_redirects=False)
    assert resp.status == 303 and resp.headers["Location"] == "/ui/fleet"
    cookie = resp.headers["Set-Cookie"]
    assert re.fullmatch(r"myolo_session=[\w-]{43}; Path=/ui; Max-Age=28800; HttpOnly; SameSite=Strict", cookie)
    return cookie.split(";")[0].split("=", 1)[1]


async def test_login_sets_an_httponly_strict_cookie_and_never_shows_the_token(sim) -> None:
    _, client, _ = sim
    token = shared()[1][VIEWER]
    form = await client.get("/ui/login")
    assert form.status == 200 and 'method="post"' in await form.text()
    sid = await _login(client)
    client.session.cookie_jar.clear()
    resp = await client.get("/ui/api/catalogue", cookies={"myolo_session": sid})
    body = await resp.text()
    assert resp.status == 200 and token not in body
    names = [p["name"] for p in (await resp.json())["pages"]]
    assert {"fleet", "node", "jobs", "job", "allocations", "rollouts", "drift", "registry", "events"} <= set(names)
    assert (await resp.json())["who"] == VIEWER


async def test_a_bad_token_or_a_scrape_token_gets_no_session(sim) -> None:
    _, client, _ = sim
    for token in ("myolo_not-a-token", shared()[1][SCRAPER], "x" * 5000):
        resp = await client.post("/ui/login", data={"token": token}, allow_redirects=False)
        assert resp.status == 303 and resp.headers["Location"] == "/ui/login?failed"
        assert "Set-Cookie" not in resp.headers
        assert token not in resp.headers["Location"]
    page = await client.get("/ui/login?failed")
    assert 'id="failed" hidden' not in await page.text()


async def test_without_a_session_the_data_is_refused_but_the_shell_loads(sim) -> None:
    _, client, _ = sim
    assert (await client.get("/ui/api/pages/fleet")).status == 401
    assert (await client.get("/ui/api/catalogue", cookies={"myolo_session": "forged"})).status == 401
    assert (await client.get("/ui/api/events")).status == 401
    shell = await client.get("/ui/fleet")
    assert shell.status == 200 and "/ui/static/app.js" in await shell.text()
    assert (await client.get("/ui/no-such-page")).status == 404


async def test_a_session_never_writes_even_an_admins(sim) -> None:
    _, client, _ = sim
    sid = await _login(client, ADMIN)
    cookies = {"myolo_session": sid}
    assert (await client.get("/ui/api/catalogue", cookies=cookies)).status == 200
    # the API's reads and writes need a bearer token: the cookie is not one
    assert (await client.get("/v1/nodes", cookies=cookies)).status == 401
    for path in ("/v1/nodes/n1/cordon", "/v1/jobs"):
        resp = await client.post(path, json={"reason": "x"}, cookies=cookies)
        assert resp.status == 401, path
    # and the session's role is viewer, whoever logged in
    catalogue = await (await client.get("/ui/api/catalogue", cookies=cookies)).json()
    assert catalogue["who"] == ADMIN
    ui = next(c for c in sim[0].peers if isinstance(c, Ui))
    assert ui.sessions.who(sid) == (ADMIN, "viewer")


async def test_a_session_expires_on_the_coordinators_clock_and_logout_ends_it(sim) -> None:
    _, client, clock = sim
    sid = await _login(client)
    cookies = {"myolo_session": sid}
    await clock.advance(8 * 3600 - 1)
    assert (await client.get("/ui/api/catalogue", cookies=cookies)).status == 200
    await clock.advance(2)
    assert (await client.get("/ui/api/catalogue", cookies=cookies)).status == 401
    sid = await _login(client)
    out = await client.post("/ui/logout", cookies={"myolo_session": sid}, allow_redirects=False)
    assert out.status == 303 and "Max-Age=0" in out.headers["Set-Cookie"]
    assert (await client.get("/ui/api/catalogue", cookies={"myolo_session": sid})).status == 401


async def test_every_answer_carries_the_csp_and_nosniff(sim) -> None:
    _, client, _ = sim
    sid = await _login(client)
    for path in ("/ui/login", "/ui/fleet", "/ui/static/app.js", "/ui/static/ui.css", "/ui/api/pages/fleet"):
        resp = await client.get(path, cookies={"myolo_session": sid})
        assert resp.status == 200, path
        assert resp.headers["Content-Security-Policy"] == CSP
        assert "default-src 'self'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert (await client.get("/ui/static/..%2Fcomponent.py")).status == 404
    assert (await client.get("/ui/static/nothing.js")).status == 404


async def test_the_pages_are_the_components_data_with_markup_kept_as_data(sim) -> None:
    coord, client, clock = sim
    gpus = [GpuReading(index=i, uuid=f"G-{i}", name=HOSTILE, util_gpu=40.0 + i) for i in range(2)]
    await coord.router(new_event(NodeSample(node_id=HOSTILE, backend="sim", gpus=gpus), "/a/x", clock=clock), INFO)
    fault = NodeFault(node_id=HOSTILE, kind="xid", health="fail", xid=79, gpu_index=1, reasons=[HOSTILE])
    await coord.router(new_event(fault, "/a/x", clock=clock), INFO)
    sid = await _login(client)
    cookies = {"myolo_session": sid}
    fleet = await (await client.get("/ui/api/pages/fleet", cookies=cookies)).json()
    [tile] = fleet["nodes"]
    assert tile["node_id"] == HOSTILE
    assert tile["gpus"][1][6] == 79 and tile["gpus"][0][6] is None  # the XID badge on GPU 1 only
    node = await (await client.get("/ui/api/pages/node", params={"key": HOSTILE}, cookies=cookies)).json()
    assert node["node"]["recent_faults"][0]["reasons"] == [HOSTILE]
    history = await (await client.get("/ui/api/pages/node-history", params={"key": HOSTILE}, cookies=cookies)).json()
    assert [g["util"] for g in history["gpus"]] == [[40.0], [41.0]]
    events = await (await client.get("/ui/api/pages/events", cookies=cookies)).json()
    assert events["items"][0]["kind"] == "fault" and HOSTILE in events["items"][0]["text"]
    assert (await client.get("/ui/api/pages/node", params={"key": "nobody"}, cookies=cookies)).status == 404
    assert (await client.get("/ui/api/pages/node", cookies=cookies)).status == 404  # a keyed page needs its key


async def test_the_live_feed_names_the_components_that_changed(tmp_path: Path) -> None:
    clock = SystemClock()
    coord = offline_coordinator(tmp_path, clock=clock, MYOLO_UI_COALESCE_S="0.05")
    client = await _client(coord)
    try:
        sid = await _login(client)
        resp = await client.get("/ui/api/events", cookies={"myolo_session": sid})
        assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
        assert resp.headers["Content-Security-Policy"] == CSP
        assert await resp.content.readuntil(b"\n\n") == b"retry: 3000\n\n"
        assert (await resp.content.readuntil(b"\n\n")).startswith(b"event: hello\ndata: ")
        sample = NodeSample(node_id="n1", backend="sim", gpus=[GpuReading(index=0, uuid="G", name="sim")])
        for seq in range(20):  # many changes in one coalescing window: one message
            await coord.router(new_event(msgspec.structs.replace(sample, seq=seq), "/a/n1", clock=clock), INFO)
        got = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
        assert got == b'event: changed\ndata: {"components":["fleet","ui"]}\n\n'
        resp.close()
    finally:
        await client.close()


async def test_the_api_stops_with_a_browser_on_the_live_feed(tmp_path: Path) -> None:
    """A followed feed never ends by itself: stopping the API cuts it after the grace instead of waiting."""
    coord = offline_coordinator(tmp_path, clock=SystemClock())
    parts = [p for p in (c.api() for c in coord.peers) if p is not None]
    runner, port = await serve(coord, parts, security())
    url = f"http://127.0.0.1:{port}"
    async with ClientSession() as session:
        login = await session.post(f"{url}/ui/login", data={"token": shared()[1][VIEWER]}, allow_redirects=False)
        sid = login.headers["Set-Cookie"].split(";")[0].split("=", 1)[1]
        resp = await session.get(f"{url}/ui/api/events", headers={"Cookie": f"myolo_session={sid}"})
        assert await resp.content.readuntil(b"\n\n") == b"retry: 3000\n\n"
        assert len(coord.get(Ui).feed.streams) == 1
        await asyncio.wait_for(runner.cleanup(), 30)  # a bound on a hang: aiohttp's own default is 60 s
        assert not coord.get(Ui).feed.streams, "the stream was ended, and left the feed"
        resp.close()
