"""``ai.myolo.audit.v1``: one write to the coordinator's API, who made it and what became of it.

A write is recorded twice, under one ``request_id``: ``attempt`` before it runs (the coordinator refuses the
write with 503 if that record cannot be written, so nothing changes unrecorded) and its result after (``done``,
``refused`` or ``failed`` with the HTTP status). A write refused before it could run (403, 415) has only its
result; a standby's answer is ``redirected`` (307 to the leader, which records the write again). An ``attempt``
without a result means the coordinator stopped while the write ran.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from myolo.events.payloads.common import Id, Payload

Outcome = Literal["attempt", "done", "redirected", "refused", "failed"]


class AuditRecord(Payload, kw_only=True):
    request_id: Id
    outcome: Outcome
    who: Id  # the token's name ("anonymous" where the API runs without authentication)
    role: Literal["scrape", "viewer", "operator", "admin"]
    method: Annotated[str, msgspec.Meta(min_length=1, max_length=16)]
    path: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]  # as requested, query included
    route: str | None = None  # the route's pattern, e.g. /v1/nodes/{node_id}/cordon
    target: str | None = None  # what the write is about: a node, a job
    status: int | None = None  # the HTTP status answered (absent on an attempt)
    error: str | None = None  # why it was refused or failed
    remote: str | None = None  # the caller's address as the coordinator saw it
    coordinator: Id  # the instance that answered
    time: float  # seconds since the epoch, on the coordinator's clock
