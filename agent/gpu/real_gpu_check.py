"""Prepared check for a session with a real GPU. Run on the GPU machine:

    python -m myolo.agent.gpu.real_gpu_check [--out result.json] [--repeats 20] [--no-cli]

It opens the NVML backend, reads once, checks that what came back is real hardware and not the simulator
(backend ``nvml``, no ``GPU-SIM`` uuid, memory total > 0, an NVIDIA/H-series name), lists which fields the
GPU left absent, times ``read_all`` (median of ``--repeats``) and a whole sample (read + health + JSON),
checks the XID/ECC event thread starts and stops, and runs ``myolo-agent sample --json`` (as
``python -m myolo.agent sample --json``) to check the operator's command end to end. Prints one JSON object
(also written to ``--out`` or ``$OUT/real_gpu_check.json``); exit 0 when every check passed.

Needs only the standard library, ``nvidia-ml-py`` and ``msgspec`` (the CLI step also needs typer/rich and
is reported as skipped without them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import msgspec

from myolo.agent.gpu.backend import GpuBackendError
from myolo.agent.gpu.nvml import NvmlBackend
from myolo.agent.gpu.sample import build_sample
from myolo.agent.health import HealthState
from myolo.common.clock import SystemClock
from myolo.common.logs import configure_logging
from myolo.events.payloads import GpuReading, NodeSample
from myolo.events.payloads.compact import compact_sample

# ``nvlink`` is left out: published, it lists only links down or counting errors (``nvlink_links`` tells support)
OPTIONAL_FIELDS = [
    f for f in GpuReading.__struct_fields__ if f not in ("index", "uuid", "name", "health", "health_reasons", "nvlink")
]


def check_reading(r: GpuReading) -> list[str]:
    """Problems that would mean this is not a real GPU reading (empty list: looks real)."""
    problems = []
    if r.uuid.startswith("GPU-SIM"):
        problems.append(f"gpu {r.index}: simulated uuid {r.uuid}")
    if not (r.mem_total_bytes or 0) > 0:
        problems.append(f"gpu {r.index}: memory total {r.mem_total_bytes!r} is not > 0")
    if "NVIDIA" not in r.name.upper() and "H" not in r.name.upper():
        problems.append(f"gpu {r.index}: name {r.name!r} names neither NVIDIA nor an H-series part")
    if r.health == "fail" and any("lost" in x or "cannot open" in x for x in r.health_reasons):
        problems.append(f"gpu {r.index}: unreadable: {r.health_reasons}")
    return problems


def time_calls(fn: Any, repeats: int) -> dict[str, float]:
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - w0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return {
        "median_ms": round(statistics.median(wall), 3),
        "min_ms": round(min(wall), 3),
        "max_ms": round(max(wall), 3),
        "cpu_median_ms": round(statistics.median(cpu), 3),
    }


async def check_events(backend: NvmlBackend, listen_s: float) -> dict[str, Any]:
    q = backend.start_events()
    await asyncio.sleep(listen_s)  # a real driver: we only listen for a moment, nothing is asserted on time
    seen = []
    while not q.empty():
        ev = q.get_nowait()
        seen.append({"gpu": ev.gpu_index, "kind": ev.kind, "xid": ev.xid})
    events = backend._events
    registered = dict(events.registered) if events is not None else {}
    t0 = time.perf_counter()
    await asyncio.to_thread(backend.stop_events)
    return {
        "registered_masks": {str(k): hex(v) for k, v in registered.items()},
        "events_seen": seen,
        "stop_ms": round((time.perf_counter() - t0) * 1e3, 1),
        "thread_stopped": events is None or not events.running,
    }


def run_cli(timeout_s: float) -> dict[str, Any]:
    """``myolo-agent sample --json`` as an operator would run it; exit 1 only means "not healthy"."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "myolo.agent", "sample", "--json"], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout_s} s"}
    out: dict[str, Any] = {"exit_code": p.returncode, "wall_s": round(time.perf_counter() - t0, 3)}
    if p.returncode not in (0, 1):
        missing = "No module named" in p.stderr
        out.update(ok=missing, skipped=missing, stderr=p.stderr[-2000:])
        return out
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        out.update(ok=False, error=f"not JSON: {e}", stdout=p.stdout[-2000:])
        return out
    uuids = [g.get("uuid", "") for g in doc.get("gpus", [])]
    out.update(
        ok=doc.get("backend") == "nvml" and bool(uuids) and not any(u.startswith("GPU-SIM") for u in uuids),
        backend=doc.get("backend"),
        gpus=len(uuids),
        health=doc.get("health"),
    )
    return out


def metrics_page(sample: NodeSample) -> dict[str, Any]:
    """``GET /metrics`` of this sample as the agent renders it: the time, one DCGM_FI_DEV_GPU_UTIL series per
    GPU that reads its utilisation, and the PCI addresses NVML gave (dcgm-exporter's pci_bus_id label)."""
    from myolo.agent.metrics.exporter import render_page
    from myolo.agent.metrics.observed import Observed
    from myolo.agent.metrics.plan import plan
    from myolo.agent.metrics.sources import View
    from myolo.agent.publish.publisher import PublisherStatus
    from myolo.agent.spool.stats import SpoolStats

    spool = SpoolStats(
        pending_records=0, bytes=0, max_bytes=1, segments=0, appended=0, committed=0, dropped=0, last_seq=0, acked_seq=0
    )
    view = View(sample, Observed(time.monotonic), spool, PublisherStatus(), time.monotonic(), time.monotonic(), "check")
    planned = plan()
    t0 = time.perf_counter()
    page = render_page(planned, view)
    ms = (time.perf_counter() - t0) * 1e3
    util = [line for line in page.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    return {
        "render_ms": round(ms, 3),
        "series": sum(1 for line in page.splitlines() if line and not line.startswith("#")),
        "gpu_util_series": len(util),
        "pci_bus_ids": [r.pci_bus_id for r in sample.gpus],
        "first_line": util[0] if util else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the JSON result here (default $OUT/real_gpu_check.json if $OUT is set)")
    ap.add_argument("--repeats", type=int, default=20, help="read_all timings to take the median of (default 20)")
    ap.add_argument("--listen", type=float, default=1.0, help="seconds to listen for XID/ECC events (default 1)")
    ap.add_argument("--no-cli", action="store_true", help="skip running 'myolo-agent sample --json'")
    args = ap.parse_args(argv)
    configure_logging("warning")  # NVML's warnings go to stderr: stdout carries the JSON result

    result: dict[str, Any] = {"check": "real_gpu", "python": sys.version.split()[0]}
    clock = SystemClock()
    backend = NvmlBackend(clock)
    t0 = time.perf_counter()
    try:
        backend.open()
    except GpuBackendError as e:
        result.update(ok=False, error=str(e))
        return _finish(result, args.out)
    result["open_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    try:
        health = HealthState(clock)
        t0 = time.perf_counter()
        sample = build_sample(backend, "real-gpu-check", health)
        result["first_sample_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
        problems = [] if sample.backend == "nvml" else [f"backend is {sample.backend!r}, not 'nvml'"]
        if not sample.gpus:
            problems.append("no GPUs found")
        for r in sample.gpus:
            problems += check_reading(r)
        published = compact_sample(sample)  # what the daemon sends: absent there means not supported
        encoded = msgspec.json.encode(published)
        result.update(
            backend=sample.backend,
            driver_version=sample.driver_version,
            cuda_version=sample.cuda_version,
            gpu_count=len(sample.gpus),
            health=sample.health,
            health_reasons=sample.health_reasons,
            gpus=[
                {
                    "index": r.index,
                    "uuid": r.uuid,
                    "name": r.name,
                    "absent_fields": [f for f in OPTIONAL_FIELDS if getattr(r, f) is None],
                    "nvlinks": (r.nvlink_up or (0, 0))[1],
                }
                for r in published.gpus
            ],
            sample=msgspec.to_builtins(sample),
            sample_json_bytes={"as_read": len(msgspec.json.encode(sample)), "published": len(encoded)},
            nvml_call_errors=dict(backend.caller.errors) if backend.caller else {},
        )
        result["read_all"] = time_calls(backend.read_all, args.repeats)
        result["sample_with_health_and_json"] = time_calls(
            lambda: msgspec.json.encode(compact_sample(build_sample(backend, "real-gpu-check", health))), args.repeats
        )
        result["metrics_page"] = metrics_page(sample)
        if result["metrics_page"]["gpu_util_series"] != sum(1 for r in sample.gpus if r.util_gpu is not None):
            problems.append(f"GET /metrics: {result['metrics_page']}")
        result["events"] = asyncio.run(check_events(backend, args.listen))
        if not result["events"]["thread_stopped"]:
            problems.append("event thread did not stop")
    finally:
        backend.close()
    if not args.no_cli:
        result["cli"] = run_cli(120.0)
        if not result["cli"].get("ok"):
            problems.append(f"myolo-agent sample --json: {result['cli']}")
    result.update(ok=not problems, problems=problems)
    return _finish(result, args.out)


def _finish(result: dict[str, Any], out: str | None) -> int:
    text = json.dumps(result, indent=2, default=str)
    print(text)
    path = out or (os.path.join(os.environ["OUT"], "real_gpu_check.json") if os.environ.get("OUT") else None)
    if path:
        with open(path, "w") as f:
            f.write(text)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    raise SystemExit(main())
