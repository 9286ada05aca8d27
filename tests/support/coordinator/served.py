"""A leading coordinator's real API on a real port, and ``myoloctl`` run against it in a thread (so the
test's event loop serves the requests the CLI makes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp.test_utils import TestServer
from typer.testing import CliRunner, Result

from myolo.coordinator.api.app import create_app
from myolo.coordinator.cli.main import app
from myolo.coordinator.core.coordinator import Coordinator
from tests.support.api_auth import OPERATOR, security, token


@asynccontextmanager
async def serve(coord: Coordinator) -> AsyncIterator[str]:
    """Every component's routes behind the real gate; yields the base URL."""
    parts = [p for p in (c.api() for c in coord.peers) if p is not None]
    server = TestServer(create_app(coord, parts, security()))
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


async def myoloctl(url: str, *args: str, who: str = OPERATOR) -> Result:
    env = {"MYOLO_TOKEN": token(who), "MYOLO_API": "", "COLUMNS": "200"}
    return await asyncio.to_thread(CliRunner().invoke, app, [*args, "--api", url], env=env)
