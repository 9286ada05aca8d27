"""The node's leak watch fed with NodeSamples on simulated time: reports, alert fault, series life cycle."""

from __future__ import annotations

import asyncio
import os

from myolo.agent.leak.detector import LeakDetector
from myolo.agent.leak.rss import host_total_bytes, read_rss
from myolo.common.clock import SimClock
from myolo.events.payloads import GpuProcess, GpuReading, LeakReport, NodeFault, NodeSample

TOTAL = 80 * 2**30


def _sample(used: int, pids: dict[int, int]) -> NodeSample:
    gpu = GpuReading(
        index=0,
        uuid="GPU-0",
        name="sim",
        mem_total_bytes=TOTAL,
        mem_used_bytes=used,
        processes=[GpuProcess(pid=p, used_bytes=b) for p, b in pids.items()],
    )
    steady = GpuReading(index=1, uuid="GPU-1", name="sim", mem_total_bytes=TOTAL, mem_used_bytes=TOTAL // 2)
    return NodeSample(node_id="n1", backend="sim", gpus=[gpu, steady])


async def test_leaking_gpu_and_process_raise_a_fault_and_reports_on_sim_clock() -> None:
    clock = SimClock()
    detector = LeakDetector("n1")
    out: list[LeakReport | NodeFault] = []
    t0 = clock.monotonic()

    async def agent_loop() -> None:  # what the daemon does every sample interval
        while True:
            hours = (clock.monotonic() - t0) / 3600
            proc = int(0.5 * TOTAL + 0.01 * TOTAL * hours)  # 1 %/h leak in pid 42
            out.extend(detector.observe(_sample(proc + 2**30, {42: proc}), clock.monotonic()))
            await clock.sleep(1.0)

    task = asyncio.create_task(agent_loop())
    await clock.run_for(3600, step=60)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    faults = [p for p in out if isinstance(p, NodeFault)]
    assert {(f.kind, f.health, f.gpu_index) for f in faults} == {("leak", "warn", 0)}
    assert len(faults) == 2  # the GPU series and the process series, once each
    reports = [p for p in out if isinstance(p, LeakReport)]
    subjects = {(r.subject, r.gpu_index, r.pid) for r in reports}
    assert subjects == {("gpu", 0, None), ("process_gpu", 0, 42), ("gpu", 1, None)}
    last = {(r.subject, r.gpu_index): r for r in reports}
    assert last[("process_gpu", 0)].alert and 0.7 < last[("process_gpu", 0)].slope_pct_per_h < 1.3
    assert not last[("gpu", 1)].alert and abs(last[("gpu", 1)].slope_pct_per_h) < 0.01
    # periodic: the steady GPU reports every report_interval_s (300 s) once its first verdict exists
    steady_times = [r for r in reports if r.gpu_index == 1]
    assert 6 <= len(steady_times) <= 9


def test_new_process_restarts_warmup_and_gone_process_is_forgotten() -> None:
    detector = LeakDetector("n1")
    for t in range(1200):
        detector.observe(_sample(TOTAL // 2, {7: TOTAL // 2}), float(t))
    gpu0 = detector._series[("gpu", 0, None)].series
    assert gpu0.samples == 1200
    detector.observe(_sample(TOTAL // 2 + 2**30, {7: TOTAL // 2, 8: 2**30}), 1200.0)
    assert detector._series[("gpu", 0, None)].series.samples == 1  # a new trainer: warm-up again
    detector.observe(_sample(2**30, {8: 2**30}), 1201.0)
    assert ("process_gpu", 0, 7) not in detector.tracked and ("process_gpu", 0, 8) in detector.tracked


def test_host_rss_series_from_psutil() -> None:
    detector = LeakDetector("n1")
    rss = read_rss([os.getpid(), 2**22 + 12345])  # ourselves, and a pid that does not exist
    assert list(rss) == [os.getpid()] and rss[os.getpid()] > 0
    total = host_total_bytes()
    for t in range(100):
        detector.observe_rss(rss, total, float(t))
    assert ("host_rss", None, os.getpid()) in detector.tracked
    detector.observe_rss({}, total, 100.0)
    assert detector.tracked == []
