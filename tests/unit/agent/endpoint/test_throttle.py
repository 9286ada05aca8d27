"""POST /healthcheck reads the GPUs at most once per interval: callers during a read share it, callers after it
within the interval get the report as it stands, with the read's age; the endpoint changes nothing else."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from myolo.agent.endpoint import ActiveCheck, HealthServer
from myolo.agent.endpoint.checks import check_nvml, report
from myolo.common.clock import SimClock


def current():
    return report("node-a", "sim", "4.0", {"nvml": check_nvml("sim", 1, None, 0.1, 1.0)})


class SlowRead:
    """An active read that waits until the test lets it finish, counting how often it ran."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()

    async def __call__(self):
        self.calls += 1
        await self.release.wait()
        return current()


async def test_callers_during_a_read_share_it_and_callers_after_it_reuse_it_within_the_interval() -> None:
    clock, read = SimClock(), SlowRead()
    check = ActiveCheck(read, current, clock, min_interval_s=2.0)
    waiting = [asyncio.create_task(check()) for _ in range(50)]
    await asyncio.sleep(0)
    read.release.set()
    answers = await asyncio.gather(*waiting)
    assert read.calls == 1 and all(a.fresh and a.read_age_s == 0 for a in answers)

    await clock.advance(1.5)
    again = await check()
    assert read.calls == 1 and not again.fresh and again.read_age_s == pytest.approx(1.5)
    assert again.report.status == "ok"

    await clock.advance(0.5)  # the interval has passed: the next caller reads again
    assert (await check()).fresh and read.calls == 2 and check.reads == 2


async def test_a_caller_who_hangs_up_does_not_cancel_the_read_the_others_wait_on() -> None:
    clock, read = SimClock(), SlowRead()
    check = ActiveCheck(read, current, clock, min_interval_s=2.0)
    first, second = asyncio.create_task(check()), asyncio.create_task(check())
    await asyncio.sleep(0)
    first.cancel()
    read.release.set()
    assert (await second).fresh and read.calls == 1
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_failed_read_still_counts_against_the_interval() -> None:
    clock, calls = SimClock(), []

    async def broken():
        calls.append(1)
        raise RuntimeError("driver gone")

    check = ActiveCheck(broken, current, clock, min_interval_s=2.0)
    with pytest.raises(RuntimeError):
        await check()
    assert not (await check()).fresh and calls == [1]  # a POST loop cannot hammer a failing driver either


async def test_the_endpoint_reads_at_most_once_per_interval_and_only_reads() -> None:
    clock, reads = SimClock(), []

    async def read():
        reads.append(clock.monotonic())
        return current()

    server = HealthServer(current, ActiveCheck(read, current, clock, 2.0), host="127.0.0.1", port=0)
    await server.start()
    url = server.url
    try:
        async with aiohttp.ClientSession() as http:
            seen = []
            for _ in range(100):
                async with http.post(f"{url}/healthcheck") as resp:
                    assert resp.status == 200 and (await resp.json())["node_id"] == "node-a"
                    seen.append(resp.headers["X-Myolo-Gpu-Read"])
            assert reads == [0.0] and seen[0] == "fresh" and set(seen[1:]) == {"0.0s old"}
            await clock.advance(2.0)
            async with http.post(f"{url}/healthcheck") as resp:
                assert resp.headers["X-Myolo-Gpu-Read"] == "fresh" and reads == [0.0, 2.0]

            # read-only: no other method, no other path, and no body worth reading
            for method, path in (
                ("PUT", "/healthz"),
                ("DELETE", "/healthz"),
                ("PUT", "/healthcheck"),
                ("GET", "/healthcheck"),
            ):
                async with http.request(method, f"{url}{path}") as resp:
                    assert resp.status == 405, (method, path)
            async with http.post(f"{url}/healthcheck", data=b"x" * 100_000) as resp:
                assert resp.status == 413
            async with http.post(f"{url}/v1/anything") as resp:
                assert resp.status == 404
            assert reads == [0.0, 2.0]
    finally:
        await server.stop()
