"""Fixtures shared by the agent's unit tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest


@pytest.fixture
def short_dir():
    """A fresh directory under /tmp: AF_UNIX paths (the control socket) must stay short."""
    d = tempfile.mkdtemp(prefix="ma-", dir="/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
async def stop_nodes(short_dir: Path) -> AsyncIterator[None]:
    """For modules that run daemons as ``daemon/test_commands.Node``: what a failed test left running is stopped
    after it, so its teardown cannot wait forever on a simulated clock nobody advances (before ``short_dir``,
    the daemons' data dir, is removed)."""
    yield
    from tests.unit.agent.daemon.test_commands import Node

    await Node.stop_left_running()
