"""The logs route over the real supervisor: a running worker's log as it grows, then its end once stopped."""

from __future__ import annotations

import msgspec
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from myolo.agent.endpoint.logs import JobLogs
from myolo.events.payloads.worker_logs import WorkerLogChunk, WorkerLogIndex
from tests.support.helpers import wait_until
from tests.unit.agent.trainer.conftest import start_args


async def test_a_workers_log_is_served_while_it_runs_and_ends_once_it_stopped(node_factory) -> None:
    node = await node_factory({"FAKE": "forever"})
    app = web.Application()
    app.add_routes(JobLogs(node.sup).routes())
    async with TestClient(TestServer(app)) as client:

        async def read(**params: int) -> WorkerLogChunk:
            resp = await client.get("/v1/jobs/j1/logs", params={k: str(v) for k, v in params.items()})
            assert resp.status == 200, await resp.text()
            return msgspec.convert(await resp.json(), WorkerLogChunk)

        await node.sup.start(start_args([0, 2], generation=3))
        await wait_until(lambda: node.progress, 30, "progress")

        async def rank1_wrote() -> bool:  # progress comes from rank 0: rank 1's first line may not be written yet
            return "fake worker rank 1" in (await read(rank=1)).text

        await wait_until(rank1_wrote, 30, "rank 1's first log line")
        first = await read(rank=1)
        assert first.generation == 3 and first.node_id == "node-a" and not first.eof
        assert "fake worker rank 1 job j1 mode forever" in first.text
        resp = await client.get("/v1/jobs/j1/logs")
        index = msgspec.convert(await resp.json(), WorkerLogIndex)
        assert [(e.rank, e.generation, e.running) for e in index.ranks] == [(0, 3, True), (1, 3, True)]

        await node.sup.stop("j1", 3, checkpoint=True)
        rest = await read(rank=0, offset=0)
        assert rest.eof and rest.next_offset == rest.size and "control stop at step" in rest.text
        after = await read(rank=1, offset=first.next_offset)
        assert after.eof and after.next_offset == after.size
