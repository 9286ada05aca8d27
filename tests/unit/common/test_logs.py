"""``configure_logging``: JSON lines that carry tracebacks, and a level a daemon can change while running."""

from __future__ import annotations

import io
import json
import logging

import structlog

from myolo.common.logs import configure_logging


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_the_traceback_of_structlog_and_stdlib_records(restore_logging) -> None:
    stream = io.StringIO()
    configure_logging("info", json=True, stream=stream)
    try:
        raise ZeroDivisionError("division by zero")
    except ZeroDivisionError:
        structlog.get_logger("myolo.test").exception("sample failed", seq=7)
        logging.getLogger("aiohttp.test").exception("handler failed")
    first, second = lines(stream)
    assert (first["event"], first["seq"], first["level"]) == ("sample failed", 7, "error")
    assert "Traceback" in first["exception"] and "ZeroDivisionError: division by zero" in first["exception"]
    assert second["event"] == "handler failed" and "ZeroDivisionError" in second["exception"]


def test_the_root_level_set_after_start_decides_for_structlog_events_too(restore_logging) -> None:
    stream = io.StringIO()
    configure_logging("info", json=True, stream=stream)
    log = structlog.get_logger("myolo.test")
    log.debug("not shown")
    logging.getLogger().setLevel(logging.DEBUG)  # what the agent's SIGHUP reload does
    log.debug("shown", n=1)
    logging.getLogger().setLevel(logging.WARNING)
    log.info("not shown either")
    log.warning("shown too", n=2)
    assert [(x["event"], x["n"]) for x in lines(stream)] == [("shown", 1), ("shown too", 2)]
