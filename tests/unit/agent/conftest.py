"""Fixtures shared by the agent's unit tests."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def short_dir():
    """A fresh directory under /tmp: AF_UNIX paths (the control socket) must stay short."""
    d = tempfile.mkdtemp(prefix="ma-", dir="/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)
