"""Structured logging with structlog: JSON lines under journald or in files, pretty output on a terminal.

One call at process start. stdlib ``logging`` records (aiokafka, aiohttp) go through the same renderer so a
journal holds one format.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "info", *, json: bool | None = None, stream=None) -> None:
    """Set up structlog + stdlib logging. ``json=None`` picks JSON unless the stream is a terminal."""
    stream = stream or sys.stderr
    if json is None:
        json = not stream.isatty()
    lvl = logging.getLevelNamesMapping().get(level.upper())
    if lvl is None:
        raise ValueError(f"log level {level!r} is not one of debug, info, warning, error")
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # JSON carries a traceback as text (the console renderer prints its own)
    render = (
        [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
        if json
        else [structlog.dev.ConsoleRenderer()]
    )
    structlog.configure(
        # the stdlib level decides, so a daemon's reload of log_level (root.setLevel) reaches structlog too
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *render],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(lvl)
    logging.getLogger("aiokafka").setLevel(max(lvl, logging.WARNING))
