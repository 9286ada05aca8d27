"""The answers of an agent's ``GET /v1/jobs/{job_id}/logs``: a trainer worker's log, read in chunks.

Not events: an HTTP contract between the agent (which holds the logs) and ``myoloctl logs job`` (which asks
each node for its ranks), so both sides decode the same typed answer. A client follows a log by asking again
from ``next_offset`` until ``eof``.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from myolo.events.payloads.common import Id, NonNegInt

DEFAULT_LOG_LIMIT = 64 << 10  # bytes per answer unless ``limit`` says otherwise
MAX_LOG_LIMIT = 1 << 20  # a larger ``limit`` is lowered to this
MAX_LOG_RANKS = 4096  # entries of one index answer


class WorkerLogChunk(msgspec.Struct, kw_only=True):
    """Bytes ``[offset, next_offset)`` of rank ``rank``'s log of ``generation``, decoded as UTF-8 (invalid bytes
    replaced). ``next_offset`` may stop short of ``offset + limit`` so a character is never cut in two.
    ``eof``: the worker no longer runs here and ``next_offset`` reached the end of its log (``size``)."""

    job_id: Id
    generation: NonNegInt
    rank: NonNegInt
    node_id: Id
    offset: NonNegInt
    next_offset: NonNegInt
    size: NonNegInt
    text: Annotated[str, msgspec.Meta(max_length=MAX_LOG_LIMIT)]
    eof: bool


class WorkerLogEntry(msgspec.Struct, kw_only=True):
    """A rank whose log is on the node: its newest generation here (or the one asked for)."""

    rank: NonNegInt
    generation: NonNegInt
    size: NonNegInt
    running: bool


class WorkerLogIndex(msgspec.Struct, kw_only=True):
    """The ranks of a job whose logs are on the node (without ``rank`` in the query), and every generation of
    the job with logs here."""

    job_id: Id
    node_id: Id
    ranks: Annotated[list[WorkerLogEntry], msgspec.Meta(max_length=MAX_LOG_RANKS)]
    generations: Annotated[list[NonNegInt], msgspec.Meta(max_length=MAX_LOG_RANKS)]
