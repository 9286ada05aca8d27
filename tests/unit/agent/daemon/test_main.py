"""The daemon end to end in one process, on a simulated clock, against an in-memory broker that can go away.

The real-broker version of these scenarios is in tests/integration/agent; here time is simulated, so an hour
of outage costs milliseconds and every tick is accounted for.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import msgspec
import pytest
import structlog

from myolo.agent.config import load_agent_config
from myolo.agent.control import InjectRequest, StatusRequest
from myolo.agent.daemon import loops
from myolo.agent.daemon.assemble import build_runtime
from myolo.agent.daemon.main import handle_control, serve
from myolo.agent.gpu import SimBackend
from myolo.agent.notify import Notifier
from myolo.common.clock import SimClock
from myolo.events.envelope import Event
from myolo.events.payloads import NodeFault, NodeSample
from tests.support.helpers import wait_until


class BrokerAway(Exception):
    pass


class FakeBroker:
    """Stands in for Kafka: records what it acknowledges; ``up = False`` makes every call fail."""

    def __init__(self) -> None:
        self.up = True
        self.events: list[tuple[str, Event]] = []
        self.producers = 0

    def factory(self):
        broker = self

        class Producer:
            async def start(self) -> None:
                broker.producers += 1
                if not broker.up:
                    raise BrokerAway("connection refused")

            async def stop(self) -> None:
                pass

            async def enqueue(self, event: Event, topic: str | None = None):
                fut = asyncio.get_running_loop().create_future()
                if broker.up:
                    broker.events.append((topic, event))
                    fut.set_result(None)
                else:
                    fut.set_exception(BrokerAway("broker not available"))
                return event, fut

            async def send_raw(self, *a):  # pragma: no cover - only for undecodable records
                raise AssertionError("not expected")

        return Producer

    def samples(self) -> list[NodeSample]:
        return [e.data for _, e in self.events if isinstance(e.data, NodeSample)]

    def faults(self) -> list[NodeFault]:
        return [e.data for _, e in self.events if isinstance(e.data, NodeFault)]


def make_runtime(short_dir: Path, broker: FakeBroker, clock: SimClock, notifier: Notifier | None = None, **extra):
    (short_dir / "agent.toml").write_text(
        "node_id = 'node-a'\nsimulate_gpus = 4\n[health]\nenabled = false\n[publish]\nready_timeout_s = 5\n"
    )
    env = {"XDG_STATE_HOME": str(short_dir), **extra}
    cfg = load_agent_config(short_dir / "agent.toml", env=env)
    return build_runtime(
        cfg,
        clock,
        backend=SimBackend(4, clock, node_tag="node-a"),
        producer_factory=broker.factory(),
        notifier=notifier or Notifier(None),
        config_path=str(short_dir / "agent.toml"),
    )


async def play(clock: SimClock, seconds: float, step: float) -> None:
    """Advance simulated time, letting the loop run enough rounds per step for a sender draining a backlog."""
    end = clock.monotonic() + seconds
    while clock.monotonic() < end - 1e-9:
        await clock.advance(min(step, end - clock.monotonic()), settle=200)


async def settle(n: int = 50) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_samples_flow_outage_is_spooled_and_sent_in_order_without_loss(short_dir):
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock)
    task = asyncio.create_task(serve(rt, install_signals=False))
    await settle()
    await play(clock, 10, 0.5)
    assert len(broker.samples()) >= 10
    broker.up = False
    await play(clock, 600, 1.0)  # ten minutes without Kafka
    spooled = rt.publisher.spool.pending
    assert spooled >= 590
    assert rt.publisher.status.kafka == "away"
    broker.up = True
    await play(clock, 30, 1.0)
    assert rt.publisher.spool.pending <= 1
    seqs = [s.seq for s in broker.samples()]
    assert seqs == list(range(1, len(seqs) + 1))  # in order, nothing lost, nothing duplicated
    assert len(seqs) >= 640
    assert all(s.backend == "sim" and s.node_id == "node-a" for s in broker.samples())
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 10) == 0
    assert rt.publisher.spool.pending == 0  # flushed on stop


async def test_injected_fault_is_published_at_once_not_at_the_next_tick(short_dir):
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock)
    task = asyncio.create_task(serve(rt, install_signals=False))
    await settle()
    await play(clock, 3, 0.5)
    at = clock.monotonic()
    reply = handle_control(rt, InjectRequest(gpu=2, xid=79))
    assert reply.ok and "XID 79" in reply.message
    await settle()  # no clock movement: the event path alone must deliver it
    assert clock.monotonic() == at
    xids = [f for f in broker.faults() if f.kind == "xid"]
    assert len(xids) == 1
    assert (xids[0].xid, xids[0].gpu_index, xids[0].health, xids[0].simulated) == (79, 2, "fail", True)
    # at the next tick the GPU's health turns to fail and a health fault says so
    await play(clock, 1.5, 0.5)
    health = [f for f in broker.faults() if f.kind == "health" and f.gpu_index == 2]
    assert health and health[-1].health == "fail"
    assert broker.samples()[-1].health == "fail"
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 10) == 0


async def test_inject_refuses_bad_requests_with_reasons(short_dir):
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock)
    rt.backend.open()
    with pytest.raises(ValueError, match="exactly one"):
        handle_control(rt, InjectRequest(gpu=0, xid=79, clear=True))
    with pytest.raises(ValueError, match=r"indices 0\.\.3"):
        handle_control(rt, InjectRequest(gpu=9, xid=79))
    ok = handle_control(rt, InjectRequest(gpu=1, leak_rate="0.5%/h"))
    assert ok.data["faults"]["1"] == ["leak=0.5%/h"]
    status = handle_control(rt, StatusRequest())
    assert status.ok and status.data["node_id"] == "node-a"
    rt.publisher.spool.close()


async def test_status_says_where_the_health_endpoint_listens_when_the_kernel_picked_its_port(short_dir):
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock, MYOLO_HEALTH_ENABLED="true", MYOLO_HEALTH_PORT="0")
    assert handle_control(rt, StatusRequest()).data["health_url"] is None  # not listening yet
    task = asyncio.create_task(serve(rt, install_signals=False))
    await wait_until(lambda: rt.health_url is not None, timeout=30, what="the health endpoint listening")
    url = handle_control(rt, StatusRequest()).data["health_url"]
    assert url == rt.health_url and urlsplit(url).port not in (None, 0)
    async with aiohttp.ClientSession() as http, http.get(f"{url}/healthz") as resp:
        assert (await resp.json())["node_id"] == "node-a"
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 30) == 0


async def test_every_sample_says_where_the_node_and_its_agents_endpoint_are(short_dir):
    """Listening on every interface, the endpoint is advertised at the node's address (auto: loopback on
    simulated GPUs), the one a coordinator or ``myoloctl logs`` can reach; the logs route answers there too."""
    clock, broker = SimClock(), FakeBroker()
    env = {"MYOLO_HEALTH_ENABLED": "true", "MYOLO_HEALTH_PORT": "0", "MYOLO_HEALTH_HOST": "0.0.0.0"}
    rt = make_runtime(short_dir, broker, clock, **env)
    assert rt.cfg.address == "127.0.0.1"
    task = asyncio.create_task(serve(rt, install_signals=False))
    await settle()
    await play(clock, 3, 0.5)
    samples = broker.samples()
    assert samples and rt.health_url is not None
    port = urlsplit(rt.health_url).port
    assert {(s.address, s.health_url) for s in samples} == {("127.0.0.1", f"http://127.0.0.1:{port}")}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{samples[-1].health_url}/healthz") as resp:
            assert (await resp.json())["node_id"] == "node-a"
        async with http.get(f"{samples[-1].health_url}/v1/jobs/j1/logs?rank=0") as resp:
            assert resp.status == 404 and "runs no trainer workers" in (await resp.json())["error"]
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 30) == 0


async def test_ready_after_first_sample_in_kafka_then_watchdog_and_stopping(short_dir):
    path = short_dir / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.setblocking(False)
    env = {"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "3000000", "WATCHDOG_PID": str(os.getpid())}
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock, notifier=Notifier.from_env(env))
    msgs: list[str] = []

    async def read() -> None:  # like systemd: read as they come (the socket's queue holds only ~10)
        loop = asyncio.get_running_loop()
        while True:
            msgs.append((await loop.sock_recv(sock, 4096)).decode())

    reader = asyncio.create_task(read())
    task = asyncio.create_task(serve(rt, install_signals=False))
    await settle()
    await play(clock, 10, 0.5)
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 10) == 0
    await settle()
    reader.cancel()
    sock.close()
    kinds = [m.split("\n")[0].split("=")[0] for m in msgs]
    assert kinds[0] == "READY"
    assert kinds.count("WATCHDOG") >= 8  # every second (a third of 3 s) for ten seconds
    assert kinds[-1] == "STOPPING"
    assert any(k == "STATUS" for k in kinds)


async def test_ready_comes_even_when_kafka_is_down(short_dir):
    clock, broker = SimClock(), FakeBroker()
    broker.up = False
    sent = []
    notifier = Notifier(None)
    notifier.ready = lambda status=None: sent.append(status) or True  # type: ignore[method-assign]
    rt = make_runtime(short_dir, broker, clock, notifier=notifier)
    task = asyncio.create_task(serve(rt, install_signals=False))
    await settle()
    await play(clock, 4, 0.5)
    assert sent == []  # ready_timeout_s = 5 has not passed
    await play(clock, 2, 0.5)
    assert len(sent) == 1 and "kafka away" in sent[0]
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 10) == 0
    assert rt.publisher.spool.pending > 0  # kept for the next start


async def test_watchdog_stops_petting_when_the_sample_loop_stalls(short_dir):
    clock, broker = SimClock(), FakeBroker()
    pets = []
    notifier = Notifier(None, watchdog_usec=3_000_000)
    notifier.watchdog = lambda: pets.append(clock.monotonic()) or True  # type: ignore[method-assign]
    rt = make_runtime(short_dir, broker, clock, notifier=notifier)
    wd = asyncio.create_task(loops.watchdog_loop(rt))
    await settle()
    for _ in range(5):  # a ticking loop
        rt.sampler.ticks += 1
        await clock.advance(1.0)
    assert len(pets) == 5
    await play(clock, 20, 1.0)  # no ticks any more: stalled
    assert max(pets) <= 5 + 3.0 + 1.0  # petting stopped within the stall bound
    wd.cancel()
    rt.publisher.spool.close()


async def test_sighup_reload_applies_live_keys_and_keeps_restart_only_ones(short_dir, monkeypatch, restore_logging):
    monkeypatch.setenv("XDG_STATE_HOME", str(short_dir))  # the reload reads the process environment
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock)
    task = asyncio.create_task(serve(rt, install_signals=False))
    await settle()
    await play(clock, 5, 0.5)
    (short_dir / "agent.toml").write_text(
        "node_id = 'node-b'\nsimulate_gpus = 4\nsample_interval_s = 0.25\nlog_level = 'debug'\n"
        "[health]\nenabled = false\n"
    )
    with structlog.testing.capture_logs() as logs:
        rt.reload_requested.set()
        await settle()
    assert rt.cfg.sample_interval_s == 0.25
    assert rt.cfg.node_id == "node-a"  # identity needs a restart
    assert logging.getLogger().level == logging.DEBUG  # the log level is live
    restart_only = [e["keys"] for e in logs if e["event"] == "SIGHUP: changed keys take effect only after a restart"]
    assert restart_only == [["node_id"]]
    before = rt.sampler.seq
    await play(clock, 5, 0.25)
    assert rt.sampler.seq - before >= 16  # four a second now (after the tick already scheduled at the old rate)
    (short_dir / "agent.toml").write_text("sample_interval_s = -1\n")
    with structlog.testing.capture_logs() as logs:
        rt.reload_requested.set()
        await settle()
    assert rt.cfg.sample_interval_s == 0.25  # a bad file keeps the running configuration
    bad = [e for e in logs if e["event"] == "SIGHUP: configuration not reloaded, keeping the running one"]
    assert len(bad) == 1 and "sample_interval_s" in bad[0]["error"]
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 10) == 0


async def test_health_report_reflects_kafka_spool_and_gpus(short_dir):
    from myolo.agent.daemon.status import active_report, current_report

    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock)
    task = asyncio.create_task(serve(rt, install_signals=False))
    await settle()
    await play(clock, 3, 0.5)
    rep = current_report(rt)
    assert rep.status == "ok", msgspec.json.encode(rep)
    assert set(rep.checks) == {"nvml", "kafka", "spool", "gpus"}
    broker.up = False
    await play(clock, 3, 0.5)
    rep = current_report(rt)
    assert rep.status == "warn" and rep.checks["kafka"].status == "warn"
    handle_control(rt, InjectRequest(gpu=0, ecc_dbe=True))
    await play(clock, 1.5, 0.5)
    rep = await active_report(rt)
    assert rep.status == "fail" and rep.checks["gpus"].status == "fail"
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 10) == 0


async def test_a_burst_of_healthchecks_reads_the_gpus_once_per_interval(short_dir):
    """The daemon's endpoint throttles its active check ([health] active_min_interval_s): 30 POSTs at one
    simulated instant read the GPUs once; after the interval the next POST reads them again."""
    clock, broker = SimClock(), FakeBroker()
    env = {"MYOLO_HEALTH_ENABLED": "true", "MYOLO_HEALTH_PORT": "0", "MYOLO_HEALTH_ACTIVE_MIN_INTERVAL_S": "5"}
    rt = make_runtime(short_dir, broker, clock, **env)
    task = asyncio.create_task(serve(rt, install_signals=False))
    await wait_until(lambda: rt.health_url is not None, timeout=30, what="the health endpoint listening")
    reads = []
    read_all = rt.backend.read_all
    rt.backend.read_all = lambda: reads.append(clock.monotonic()) or read_all()  # type: ignore[method-assign]
    async with aiohttp.ClientSession() as http:

        async def post() -> str:
            async with http.post(f"{rt.health_url}/healthcheck") as resp:
                assert resp.status == 200
                return resp.headers["X-Myolo-Gpu-Read"]

        answers = [await post() for _ in range(30)]
        assert len(reads) == 1 and answers[0] == "fresh" and "fresh" not in answers[1:]
        await play(clock, 5, 0.5)  # the sampler reads meanwhile too; the next POST reads afresh
        before = len(reads)
        assert await post() == "fresh" and len(reads) == before + 1
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 30) == 0
