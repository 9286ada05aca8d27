"""Fixtures shared by the unit tests of every package."""

from __future__ import annotations

import logging

import pytest
import structlog


@pytest.fixture
def restore_logging():
    """For a test whose code calls ``myolo.common.logs.configure_logging`` (process-wide state): put the root
    logger, aiokafka's level and structlog's configuration back for the tests that follow."""
    root, kafka = logging.getLogger(), logging.getLogger("aiokafka")
    handlers, level, kafka_level = root.handlers[:], root.level, kafka.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    kafka.setLevel(kafka_level)
    structlog.reset_defaults()
