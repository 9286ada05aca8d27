"""The agent's ``GET /v1/jobs/{job_id}/logs``: chunks of a worker's log, its index, and hostile requests.

The logs are real files in a workers' directory laid out by ``launch.run_dir`` (as the supervisor writes
them); which workers run comes from a fake of the supervisor's view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

from myolo.agent.endpoint.logs import JobLogs
from myolo.agent.trainer.launch import rank_log, run_dir
from myolo.events.payloads import WorkerInfo
from myolo.events.payloads.worker_logs import DEFAULT_LOG_LIMIT, MAX_LOG_LIMIT, WorkerLogChunk, WorkerLogIndex

JOB = "tiny-pretrain"


@dataclass
class Workers:
    """What the route asks of the supervisor."""

    workers_dir: Path
    node_id: str = "node-a"
    running: list[WorkerInfo] = field(default_factory=list)

    def workers(self) -> list[WorkerInfo]:
        return self.running

    def run(self, generation: int, rank: int, state: str = "running", job_id: str = JOB) -> None:
        info = WorkerInfo(job_id=job_id, generation=generation, rank=rank, local_rank=0, gpu=0, pid=1, state=state)
        self.running.append(info)


def write_log(workers_dir: Path, generation: int, rank: int, data: bytes, job_id: str = JOB) -> Path:
    path = rank_log(run_dir(workers_dir, job_id, generation), rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
async def served(tmp_path):
    source = Workers(tmp_path / "workers")
    app = web.Application()
    app.add_routes(JobLogs(source).routes())
    client = TestClient(TestServer(app))
    await client.start_server()
    yield source, client
    await client.close()


async def get(client: TestClient, url: str, status: int = 200, **params) -> dict:
    # sent as written: a client's own normalising would turn %2E%2E into a path step before the agent sees it
    resp = await client.get(URL(url, encoded=True), params={k: str(v) for k, v in params.items()})
    body = await resp.json()
    assert resp.status == status, body
    return body


async def chunk(client: TestClient, job: str = JOB, **params) -> WorkerLogChunk:
    return msgspec.convert(await get(client, f"/v1/jobs/{job}/logs", **params), WorkerLogChunk)


async def test_a_log_is_read_in_chunks_from_offset_to_its_end(served) -> None:
    source, client = served
    write_log(source.workers_dir, 0, 1, b"0123456789")
    first = await chunk(client, rank=1, limit=4)
    assert (first.text, first.offset, first.next_offset, first.size, first.eof) == ("0123", 0, 4, 10, False)
    assert (first.job_id, first.generation, first.rank, first.node_id) == (JOB, 0, 1, "node-a")
    rest = await chunk(client, rank=1, offset=first.next_offset)
    assert (rest.text, rest.next_offset, rest.eof) == ("456789", 10, True)  # nobody runs rank 1: the end is the end
    past = await chunk(client, rank=1, offset=50)
    assert (past.text, past.next_offset, past.eof) == ("", 50, True)


async def test_a_running_workers_log_is_never_at_eof(served) -> None:
    source, client = served
    path = write_log(source.workers_dir, 2, 0, b"step 1\n")
    source.run(2, 0)
    got = await chunk(client, rank=0)
    assert (got.text, got.next_offset, got.eof) == ("step 1\n", 7, False)
    with path.open("ab") as f:
        f.write(b"step 2\n")
    source.running = []  # the worker exited after writing its last line
    follow = await chunk(client, rank=0, offset=got.next_offset)
    assert (follow.text, follow.eof) == ("step 2\n", True)


async def test_an_exited_worker_of_a_job_still_held_is_not_running(served) -> None:
    source, client = served
    write_log(source.workers_dir, 0, 0, b"done\n")
    source.run(0, 0, state="exited")
    source.run(0, 1)  # another rank still runs; so does another job's rank 0 of the same generation
    source.run(0, 0, job_id="other-job")
    assert (await chunk(client, rank=0)).eof is True


async def test_the_limit_defaults_to_64_kib_and_is_capped_at_1_mib(served) -> None:
    source, client = served
    write_log(source.workers_dir, 0, 0, b"x" * (MAX_LOG_LIMIT + 100))
    assert (await chunk(client, rank=0)).next_offset == DEFAULT_LOG_LIMIT
    capped = await chunk(client, rank=0, limit=10 * MAX_LOG_LIMIT)
    assert (capped.next_offset, len(capped.text), capped.eof) == (MAX_LOG_LIMIT, MAX_LOG_LIMIT, False)


async def test_a_character_cut_by_the_limit_comes_whole_in_the_next_chunk(served) -> None:
    source, client = served
    data = "é€😀 ok".encode()  # 2, 3 and 4 bytes
    write_log(source.workers_dir, 0, 0, data + b"\xff")  # and one byte that is not UTF-8 at all
    texts, offset = [], 0
    while True:
        got = await chunk(client, rank=0, offset=offset, limit=4)
        texts.append(got.text)
        assert got.next_offset > offset or got.eof  # always moves on, even when a character is cut
        offset = got.next_offset
        if got.eof:
            break
    assert "".join(texts) == "é€😀 ok\ufffd"
    assert len(texts) == 4  # "é" + 2 bytes of "€" | "€" + 1 of "😀" | "😀" | " ok" and the bad byte
    short = await chunk(client, rank=0, offset=5, limit=3)  # a limit shorter than the character: replaced, passed
    assert (short.text, short.next_offset) == ("\ufffd", 8)


async def test_the_default_generation_is_the_newest_with_that_ranks_log(served) -> None:
    source, client = served
    write_log(source.workers_dir, 0, 0, b"g0 r0")
    write_log(source.workers_dir, 0, 3, b"g0 r3")
    write_log(source.workers_dir, 1, 0, b"g1 r0")
    write_log(source.workers_dir, 10, 0, b"g10 r0")  # numeric order, not the names' order
    assert ((await chunk(client, rank=0)).text, (await chunk(client, rank=3)).text) == ("g10 r0", "g0 r3")
    old = await chunk(client, rank=0, generation=1)
    assert (old.text, old.generation) == ("g1 r0", 1)


async def test_without_a_rank_the_ranks_with_logs_here_are_listed(served) -> None:
    source, client = served
    write_log(source.workers_dir, 0, 0, b"a")
    write_log(source.workers_dir, 0, 1, b"bb")
    write_log(source.workers_dir, 1, 0, b"ccc")
    (run_dir(source.workers_dir, JOB, 1) / "rank-01.log").write_bytes(b"not a log the launcher writes")
    (run_dir(source.workers_dir, JOB, 0).parent / "g2.old").mkdir()
    source.run(1, 0)
    index = msgspec.convert(await get(client, f"/v1/jobs/{JOB}/logs"), WorkerLogIndex)
    assert index.generations == [0, 1]
    assert [(e.rank, e.generation, e.size, e.running) for e in index.ranks] == [(0, 1, 3, True), (1, 0, 2, False)]
    g0 = msgspec.convert(await get(client, f"/v1/jobs/{JOB}/logs", generation=0), WorkerLogIndex)
    assert [(e.rank, e.generation, e.running) for e in g0.ranks] == [(0, 0, False), (1, 0, False)]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/v1/jobs/%2E%2E/logs", {"rank": 0}, "job_id"),
        ("/v1/jobs/a%2F..%2F..%2Fetc/logs", {"rank": 0}, "job_id"),
        ("/v1/jobs/a%5Cb/logs", {}, "job_id"),
        ("/v1/jobs/a..b/logs", {}, "job_id"),
        ("/v1/jobs/a%00b/logs", {}, "job_id"),
        (f"/v1/jobs/{'j' * 257}/logs", {}, "job_id"),
        (f"/v1/jobs/{JOB}/logs", {"rank": -1}, "rank"),
        (f"/v1/jobs/{JOB}/logs", {"rank": "+1"}, "rank"),
        (f"/v1/jobs/{JOB}/logs", {"rank": "0x1"}, "rank"),
        (f"/v1/jobs/{JOB}/logs", {"rank": 0, "offset": "1e3"}, "offset"),
        (f"/v1/jobs/{JOB}/logs", {"rank": 0, "offset": "9" * 40}, "offset"),
        (f"/v1/jobs/{JOB}/logs", {"rank": 0, "limit": 0}, "limit"),
        (f"/v1/jobs/{JOB}/logs", {"rank": 0, "limit": " 5"}, "limit"),
        (f"/v1/jobs/{JOB}/logs", {"rank": 0, "generation": ""}, "generation"),
        (f"/v1/jobs/{JOB}/logs", {"rank": 0, "path": "/etc/passwd"}, "path"),
    ],
)
async def test_hostile_requests_are_refused_naming_the_parameter(served, path, params, field) -> None:
    source, client = served
    write_log(source.workers_dir, 0, 0, b"secret of the job")
    body = await get(client, path, status=400, **params)
    assert body["field"] == field and body["error"].startswith(f"{field}: ")


async def test_a_repeated_parameter_is_refused(served) -> None:
    source, client = served
    write_log(source.workers_dir, 0, 0, b"x")
    resp = await client.get(f"/v1/jobs/{JOB}/logs?rank=0&rank=1")
    assert resp.status == 400 and (await resp.json())["field"] == "rank"


async def test_a_job_id_of_dots_cannot_reach_above_the_workers_directory(tmp_path) -> None:
    """The launcher's own guard, which the route relies on as well: the job id came from a command."""
    workers = tmp_path / "workers"
    for job_id in ("..", ".", "...", "../..", "a/../../b"):
        assert run_dir(workers, job_id, 0).resolve().is_relative_to(workers.resolve())


async def test_a_symlink_planted_for_a_log_or_a_generation_is_not_followed(served, tmp_path) -> None:
    source, client = served
    secret = tmp_path / "secret"
    secret.write_bytes(b"private key")
    log = rank_log(run_dir(source.workers_dir, JOB, 0), 0)
    log.parent.mkdir(parents=True)
    log.symlink_to(secret)
    assert (await get(client, f"/v1/jobs/{JOB}/logs", status=404, rank=0))["field"] == "rank"
    (run_dir(source.workers_dir, JOB, 5)).symlink_to(tmp_path)  # a "generation" that is another directory
    (tmp_path / "rank-0.log").write_bytes(b"elsewhere")
    body = await get(client, f"/v1/jobs/{JOB}/logs", status=404, rank=0, generation=5)
    assert body["field"] == "generation"


async def test_unknown_jobs_generations_and_ranks_are_404_saying_what_is_missing(served) -> None:
    source, client = served
    write_log(source.workers_dir, 3, 0, b"x")
    body = await get(client, "/v1/jobs/nope/logs", status=404, rank=0)
    assert body == {"error": "job 'nope' has no worker logs on node node-a", "field": "job_id"}
    body = await get(client, f"/v1/jobs/{JOB}/logs", status=404, rank=7)
    assert body == {"error": f"job '{JOB}' has no log of rank 7 on node node-a", "field": "rank"}
    body = await get(client, f"/v1/jobs/{JOB}/logs", status=404, rank=0, generation=4)
    assert body["field"] == "generation" and "generations here: 3" in body["error"]


async def test_an_agent_without_workers_knows_no_job() -> None:
    app = web.Application()
    app.add_routes(JobLogs(None).routes())
    async with TestClient(TestServer(app)) as client:
        body = await get(client, f"/v1/jobs/{JOB}/logs", status=404, rank=0)
    assert body["field"] == "job_id" and "runs no trainer workers" in body["error"]
