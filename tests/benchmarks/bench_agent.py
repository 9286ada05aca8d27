"""The agent's own cost at 1 Hz with 8 simulated GPUs: CPU per sample, CPU share of one core, resident memory.

Two measurements:

1. In process, on a simulated clock: the daemon's real loops (sample, health rules, leak detector, spool,
   publisher send path) run for ``SIM_SECONDS`` simulated seconds against an in-memory producer that encodes
   each record like the Kafka producer does. CPU time is split into the simulator's (what NVML calls would
   cost on a real node: reported apart) and the agent's own.
2. As deployed: ``myolo-agent run --simulate-gpus 8`` as a process, publishing at 1 Hz to a real local broker
   for ``WALL_SECONDS``; its CPU share (user+sys over wall time, after warm-up) and RSS/USS from psutil.

   It runs twice: once alone, once scraped on ``GET /metrics`` every ``SCRAPE_EVERY_S`` (15 s, the scrape
   interval of dcgm-exporter's Helm chart) as Prometheus would.
3. The scrape itself: rendering the Prometheus page of 8 GPUs from the last sample, in process.

Targets: < 1 % of one core at 1 Hz and RSS < 80 MiB, with scrapes; a scrape of 8 GPUs < 5 ms. Reference:
dcgm-exporter was reported at 15-20 % of a core and 71 MiB.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import msgspec
import psutil

from myolo.agent.config import load_agent_config
from myolo.agent.daemon.assemble import build_runtime
from myolo.agent.daemon.main import serve
from myolo.agent.gpu import SimBackend
from myolo.agent.metrics.exporter import AgentMetrics
from myolo.agent.notify import Notifier
from myolo.common.clock import SimClock
from myolo.events.codec import encode
from myolo.events.payloads.compact import compact_sample
from tests.benchmarks.broker import benchmark_broker
from tests.benchmarks.common import write_result

GPUS = 8
SIM_SECONDS = 3600
WALL_SECONDS = 40.0
WARMUP_S = 8.0
SCRAPE_EVERY_S = 15.0
RENDERS = 300
ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


class EncodingProducer:
    """Acknowledges at once after encoding the record the way EventProducer.enqueue does."""

    sent = 0

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def enqueue(self, event, topic=None):
        encode(event)
        EncodingProducer.sent += 1
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return event, fut

    async def send_raw(self, *a):  # pragma: no cover
        raise AssertionError


async def in_process() -> dict:
    d = Path(tempfile.mkdtemp(prefix="mb-", dir="/tmp"))
    try:
        (d / "agent.toml").write_text(
            f"node_id = 'bench'\nsimulate_gpus = {GPUS}\ndata_dir = '{d}'\n[health]\nenabled = false\n"
        )
        clock = SimClock()
        cfg = load_agent_config(d / "agent.toml", env={})
        backend = SimBackend(GPUS, clock, node_tag="bench")
        rt = build_runtime(cfg, clock, backend=backend, producer_factory=EncodingProducer, notifier=Notifier(None))
        task = asyncio.create_task(serve(rt, install_signals=False))
        for _ in range(20):
            await asyncio.sleep(0)
        await clock.advance(5.0, settle=50)  # warm-up
        seq0, sim_read0, sim_step0 = rt.sampler.seq, backend.cost.read_cpu_s, backend.cost.step_cpu_s
        c0 = time.process_time()
        for _ in range(SIM_SECONDS):
            await clock.advance(1.0, settle=30)
        cpu = time.process_time() - c0
        samples = rt.sampler.seq - seq0
        sim_read = backend.cost.read_cpu_s - sim_read0
        sim_step = backend.cost.step_cpu_s - sim_step0
        metrics = AgentMetrics(
            rt.publisher, clock, lambda: rt.sampler.last_sample, lambda: rt.sampler.last_read_monotonic
        )
        page = metrics.render()
        times = []
        for _ in range(RENDERS):
            t0 = time.perf_counter()
            metrics.render()
            times.append(time.perf_counter() - t0)
        rt.stop_event.set()
        await task
        sample_bytes = len(msgspec.json.encode(compact_sample(rt.sampler.last_sample)))  # as published
        agent_s = (cpu - sim_read) / samples
        return {
            "samples": samples,
            "published_records": EncodingProducer.sent,
            "cpu_per_sample_ms_total": round(1e3 * cpu / samples, 4),
            "cpu_per_sample_ms_simulator_physics": round(1e3 * sim_step / samples, 4),
            "cpu_per_sample_ms_simulator_readings": round(1e3 * (sim_read - sim_step) / samples, 4),
            "cpu_per_sample_ms_agent": round(1e3 * agent_s, 4),
            "agent_cpu_share_at_1hz_pct": round(100 * agent_s, 4),
            "sample_bytes": sample_bytes,
            "scrape_render_ms_median": round(1e3 * statistics.median(times), 3),
            "scrape_render_ms_p99": round(1e3 * sorted(times)[int(0.99 * len(times)) - 1], 3),
            "scrape_page_bytes": len(page.encode()),
            "scrape_series": sum(1 for line in page.splitlines() if line and not line.startswith("#")),
        }
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scrape(port: int) -> float:
    """One scrape as Prometheus makes it; its seconds, as the scraper sees them."""
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        body = resp.read()
    assert resp.status == 200 and b"DCGM_FI_DEV_GPU_UTIL{" in body
    return time.perf_counter() - t0


def deployed(scrape: bool) -> dict:
    with benchmark_broker() as broker:
        d = Path(tempfile.mkdtemp(prefix="mb-", dir="/tmp"))
        port = _free_port()
        try:
            (d / "agent.toml").write_text(
                f"node_id = 'bench-proc'\nsample_interval_s = 1.0\nsimulate_gpus = {GPUS}\ndata_dir = '{d}'\n"
                f"control_socket = '{d}/a.sock'\n[health]\nport = {port}\n[kafka]\nbootstrap = '{broker.bootstrap}'\n"
            )
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            proc = subprocess.Popen(
                [sys.executable, "-m", "myolo.agent", "run", "--config", str(d / "agent.toml"), "--log-json"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=open(d / "log", "wb"),  # noqa: SIM115
            )
            try:
                p = psutil.Process(proc.pid)
                time.sleep(WARMUP_S)  # start-up (imports, Kafka connect) is not the steady state measured
                t0, c0 = time.monotonic(), p.cpu_times()
                scrapes: list[float] = []
                while (left := t0 + WALL_SECONDS - time.monotonic()) > 0:
                    if scrape:
                        scrapes.append(_scrape(port))
                    # the benchmark measures the agent over wall time on purpose
                    time.sleep(min(left, SCRAPE_EVERY_S if scrape else left))
                t1, c1 = time.monotonic(), p.cpu_times()
                mem = p.memory_full_info()
                alive = proc.poll() is None
            finally:
                proc.terminate()
                code = proc.wait(30)
            cpu = (c1.user - c0.user) + (c1.system - c0.system)
            return {
                "wall_s": round(t1 - t0, 2),
                "cpu_s": round(cpu, 3),
                "cpu_share_of_one_core_pct": round(100 * cpu / (t1 - t0), 3),
                "rss_mib": round(mem.rss / MiB, 1),
                "uss_mib": round(mem.uss / MiB, 1),
                "alive_during_run": alive,
                "exit_code_after_sigterm": code,
                "scrapes": len(scrapes),
                "scrape_ms_seen_by_client_max": round(1e3 * max(scrapes), 2) if scrapes else None,
            }
        finally:
            shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    inproc = asyncio.run(in_process())
    alone = deployed(scrape=False)
    proc = deployed(scrape=True)
    sim_share = (inproc["cpu_per_sample_ms_simulator_physics"] + inproc["cpu_per_sample_ms_simulator_readings"]) / 10
    write_result(
        "agent",
        {
            "gpus": GPUS,
            "interval_s": 1.0,
            "in_process_simulated_clock": {"simulated_seconds": SIM_SECONDS, **inproc},
            "deployed_process_real_broker_not_scraped": alone,
            "deployed_process_real_broker": {
                **proc,
                "simulator_share_pct_estimate": round(sim_share, 4),
                "agent_share_pct_without_simulator": round(proc["cpu_share_of_one_core_pct"] - sim_share, 3),
            },
            "scrape_every_s": SCRAPE_EVERY_S,
            "targets": {"cpu_share_pct": 1.0, "rss_mib": 80, "scrape_render_ms": 5.0},
            "meets_targets": {
                "cpu": proc["cpu_share_of_one_core_pct"] < 1.0,
                "rss": proc["rss_mib"] < 80,
                "scrape": inproc["scrape_render_ms_p99"] < 5.0,
            },
            "reference_dcgm_exporter": {"cpu_share_pct": "15-20", "rss_mib": 71, "source": "reported by users"},
        },
    )


if __name__ == "__main__":
    main()
