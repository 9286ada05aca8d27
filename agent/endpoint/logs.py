"""``GET /v1/jobs/{job_id}/logs``: the trainer workers' logs of a job on this node, for ``myoloctl logs job``.

With ``rank``: a chunk of that rank's log (``offset``, ``limit``; ``generation`` defaults to the newest one
here with that rank's log) as :class:`WorkerLogChunk`; a client follows the log by asking again from
``next_offset`` until ``eof``. Without: the job's ranks with logs here, as :class:`WorkerLogIndex`.

Every parameter is checked before anything is read: a job id that could leave the workers' directory
(``..``, a slash), a number that is not plain digits, or an unknown parameter is a 400 naming it; a job,
generation or rank with no log here is a 404 saying so. Errors are ``{"error", "field"}`` as the coordinator's
API writes them. What is running comes from the supervisor through :class:`WorkerSource`, taken before the
log is read, so ``eof`` is never said of a log its worker may still append to.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import msgspec
from aiohttp import web

from myolo.agent.trainer import logfiles
from myolo.agent.trainer.launch import rank_log, run_dir
from myolo.events.payloads import WorkerInfo
from myolo.events.payloads.common import Id
from myolo.events.payloads.worker_logs import (
    DEFAULT_LOG_LIMIT,
    MAX_LOG_LIMIT,
    MAX_LOG_RANKS,
    WorkerLogChunk,
    WorkerLogEntry,
    WorkerLogIndex,
)

PATH = "/v1/jobs/{job_id}/logs"
PARAMS = ("rank", "generation", "offset", "limit")
_DIGITS = re.compile(r"[0-9]{1,18}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ENC = msgspec.json.Encoder()


class WorkerSource(Protocol):
    """What the route needs of the trainer supervisor: where the logs are, and which workers run."""

    node_id: str
    workers_dir: Path

    def workers(self) -> list[WorkerInfo]: ...


class LogError(Exception):
    def __init__(self, status: int, error: str, field: str) -> None:
        super().__init__(error)
        self.status, self.error, self.field = status, error, field


@dataclass(frozen=True)
class LogQuery:
    rank: int | None = None
    generation: int | None = None
    offset: int = 0
    limit: int = DEFAULT_LOG_LIMIT


def check_job_id(job_id: str) -> None:
    """A job id as payloads bound it, that names one directory below the workers' directory."""
    try:
        msgspec.convert(job_id, Id)
    except msgspec.ValidationError as exc:
        raise LogError(400, f"job_id: {exc}", "job_id") from None
    if "/" in job_id or "\\" in job_id or ".." in job_id or job_id == "." or _CONTROL.search(job_id):
        raise LogError(400, "job_id: must not contain '/', '\\', '..' or control characters", "job_id")


def parse_query(query: Mapping[str, str]) -> LogQuery:
    """The query's numbers: plain decimal digits only (no sign, space or underscore). A multidict (aiohttp's
    query) gives a repeated name twice, which is refused."""
    values: dict[str, int] = {}
    for name, raw in query.items():
        if name not in PARAMS:
            raise LogError(400, f"{name[:64]}: unknown parameter (known: {', '.join(PARAMS)})", name[:64])
        if name in values:
            raise LogError(400, f"{name}: given more than once", name)
        if not _DIGITS.fullmatch(raw):
            raise LogError(400, f"{name}: must be a non-negative integer, got {raw[:32]!r}", name)
        values[name] = int(raw)
    if values.get("limit") == 0:
        raise LogError(400, "limit: must be at least 1 (bytes)", "limit")
    if "limit" in values:
        values["limit"] = min(values["limit"], MAX_LOG_LIMIT)
    return LogQuery(**values)


Running = set[tuple[int, int]]  # (generation, rank)


def answer(
    source_dir: Path, node_id: str, job_id: str, q: LogQuery, running: Running
) -> WorkerLogChunk | WorkerLogIndex:
    """The route's answer from the disk (blocking: it runs in a thread). ``running``: (generation, rank) of
    the job's workers that ran when the request came."""
    gens = logfiles.generations(source_dir, job_id)
    if not gens:
        raise LogError(404, f"job {job_id!r} has no worker logs on node {node_id}", "job_id")
    if q.generation is not None and q.generation not in gens:
        raise LogError(
            404,
            f"job {job_id!r} has no generation {q.generation} on node {node_id} (generations here: "
            f"{', '.join(map(str, gens[-10:]))})",
            "generation",
        )
    newest_first = [q.generation] if q.generation is not None else gens[::-1]
    if q.rank is None:
        return _index(source_dir, node_id, job_id, gens, newest_first, running)
    for gen in newest_first:
        path = rank_log(run_dir(source_dir, job_id, gen), q.rank)
        if logfiles.log_size(path) is not None:
            return _chunk(path, node_id, job_id, gen, q.rank, q, (gen, q.rank) in running)
    where = f" in generation {q.generation}" if q.generation is not None else ""
    raise LogError(404, f"job {job_id!r} has no log of rank {q.rank}{where} on node {node_id}", "rank")


def _chunk(path: Path, node_id: str, job_id: str, gen: int, rank: int, q: LogQuery, running: bool) -> WorkerLogChunk:
    try:
        chunk = logfiles.read_chunk(path, q.offset, q.limit)
    except OSError as exc:
        raise LogError(404, f"the log of rank {rank} of job {job_id!r} cannot be read: {exc}", "rank") from None
    whole = q.offset + len(chunk.data) >= chunk.size
    text, used = logfiles.decode(chunk.data, final=whole and not running)
    next_offset = q.offset + used
    return WorkerLogChunk(
        job_id=job_id,
        generation=gen,
        rank=rank,
        node_id=node_id,
        offset=q.offset,
        next_offset=next_offset,
        size=chunk.size,
        text=text,
        eof=not running and next_offset >= chunk.size,
    )


def _index(
    source_dir: Path, node_id: str, job_id: str, gens: list[int], newest_first: list[int], running: Running
) -> WorkerLogIndex:
    """Each rank once, at the newest generation that has its log."""
    entries: dict[int, WorkerLogEntry] = {}
    for gen in newest_first:
        for rank, path in logfiles.rank_logs(run_dir(source_dir, job_id, gen)).items():
            size = logfiles.log_size(path)
            if rank not in entries and size is not None and len(entries) < MAX_LOG_RANKS:
                entries[rank] = WorkerLogEntry(rank=rank, generation=gen, size=size, running=(gen, rank) in running)
    ranks = sorted(entries.values(), key=lambda e: e.rank)
    return WorkerLogIndex(job_id=job_id, node_id=node_id, ranks=ranks, generations=gens[-MAX_LOG_RANKS:])


class JobLogs:
    """The route, over the supervisor's view (None when this agent runs no workers: every job is unknown)."""

    def __init__(self, source: WorkerSource | None) -> None:
        self.source = source

    def routes(self) -> list[web.RouteDef]:
        return [web.get(PATH, self.get)]

    async def get(self, request: web.Request) -> web.Response:
        job_id = request.match_info["job_id"]
        try:
            check_job_id(job_id)
            q = parse_query(request.query)
            src = self.source
            if src is None:
                raise LogError(404, "this agent runs no trainer workers (commands or trainer disabled)", "job_id")
            running = {(w.generation, w.rank) for w in src.workers() if w.job_id == job_id and w.state != "exited"}
            body = await asyncio.to_thread(answer, src.workers_dir, src.node_id, job_id, q, running)
        except LogError as exc:
            return _json({"error": exc.error, "field": exc.field}, exc.status)
        return _json(body, 200)


def _json(body: object, status: int) -> web.Response:
    return web.Response(body=_ENC.encode(body), status=status, content_type="application/json")
