"""Audit records of the API's writes, sent on ``myolo.audit`` by the coordinator's plain producer.

Why two records, and why the first blocks: a write must not happen without its record. The ``attempt`` is
sent and acknowledged by Kafka (``acks=all``) *before* the route runs; if Kafka does not take it within
``api.audit_timeout_s`` the write is refused with 503 and nothing changes. Sending only after the write
could not undo a write whose record failed, and a local spool would leave the record on one coordinator's
disk, out of the auditors' sight, exactly while Kafka is away (when the coordinator cannot record its own
decisions anyway). The result (``done``/``refused``/``failed`` and the status) follows the answer's
computation; should it fail the answer still goes out (the write happened) and the loss is logged and counted.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import msgspec
import structlog
from aiohttp import web

from myolo.common.clock import Clock
from myolo.coordinator.api.auth import Caller
from myolo.coordinator.core.errors import Unavailable
from myolo.events.bus import EventProducer
from myolo.events.payloads import AuditRecord
from myolo.events.payloads.audit import Outcome

log = structlog.get_logger("myolo.coordinator.api")
Send = Callable[[AuditRecord], Awaitable[None]]
_TARGET = web.RequestKey("myolo_audit_target", str)


def kafka_sender(producer: EventProducer) -> Send:
    """Each record as an ``ai.myolo.audit.v1`` event on ``myolo.audit``, returning once Kafka acknowledged it."""

    async def send(record: AuditRecord) -> None:
        await producer.send(record)

    return send


def set_target(request: web.Request, target: str) -> None:
    """What a write is about, when the path does not say (``POST /v1/jobs``: the manifest's job name)."""
    request[_TARGET] = target


def outcome_of(status: int) -> Outcome:
    if status < 300:
        return "done"
    return "redirected" if status < 400 else "refused" if status < 500 else "failed"


@dataclass
class AuditLog:
    send: Send
    clock: Clock
    coordinator: str
    timeout_s: float = 5.0
    written: int = 0
    lost: int = 0
    last_error: str = field(default="")

    def record(self, request: web.Request, who: Caller, route: str | None) -> AuditRecord:
        """The attempt's record (its result is ``msgspec.structs.replace``d from it)."""
        info = request.match_info
        target = ",".join(info.values()) if info.http_exception is None else ""
        return AuditRecord(
            request_id=uuid.uuid4().hex,
            outcome="attempt",
            who=who.name,
            role=who.role,
            method=request.method,
            path=request.path_qs[:2048],
            route=route,
            target=target or None,
            remote=request.remote,
            coordinator=self.coordinator,
            time=self.clock.now(),
        )

    async def attempt(self, rec: AuditRecord) -> None:
        """Record the attempt, or raise Unavailable (503): the write must not run unrecorded."""
        try:
            await asyncio.wait_for(self.send(rec), self.timeout_s)  # a bound on Kafka I/O, not timed behaviour
        except Exception as exc:
            self.lost += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.error("audit record not written: write refused", path=rec.path, who=rec.who, error=self.last_error)
            raise Unavailable(
                "the write was not made: its audit record could not be written to Kafka",
                hint="the coordinator cannot reach Kafka; retry once it can",
            ) from None
        self.written += 1

    async def result(self, rec: AuditRecord, request: web.Request, status: int, error: str | None = None) -> None:
        """Record how the write ended; a failure here is logged and counted (the answer already stands)."""
        target = request.get(_TARGET) or rec.target
        done = msgspec.structs.replace(
            rec, outcome=outcome_of(status), status=status, error=error, target=target, time=self.clock.now()
        )
        try:
            await asyncio.wait_for(self.send(done), self.timeout_s)
        except Exception as exc:
            self.lost += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.error("audit result not written", path=rec.path, who=rec.who, status=status, error=self.last_error)
            return
        self.written += 1
