"""Capacity of the coordinator at the target fleet: 10,000 nodes x 8 GPUs sampling at 1 Hz.

(1) Catch-up: ``--minutes`` of fleet time (``--nodes`` x 60 x minutes samples) is put on a fresh broker by
    ``--fill-procs`` simulator processes calling FleetSimulator.send_round as fast as they can (fill rate
    reported), each round stamped 1 s after the last on a simulated clock, as an outage's backlog would be.
    Then the in-process ``Coordinator`` (as bench_coordinator.coordinator_ingest builds it: ingest_from=
    "earliest", liveness kept out) reads it from the start in a child process of its own. Reported: samples/s,
    its CPU per core (process CPU time / wall) and samples per CPU-second, its resident memory (VmRSS) at the
    end with every node in its fleet view and its peak (VmHWM), the fleet view's node count (must equal
    ``--nodes``), and the headroom: samples/s over the real-time need (nodes x 1 Hz). The memory is that of
    ``--minutes`` of history: the fleet view's rings of recent samples fill over an hour.
(2) Real time: ``--sim-procs`` simulator processes (node ids ``sim<i>-node-<n>``, one slice each) publish
    ``--nodes`` x 8 GPUs at 1 Hz for ``--realtime-s`` seconds while ``myolo-coordinator run`` leads as a
    subprocess, every node's key enrolled over its API; the first simulator injects FAIL XIDs on distinct nodes,
    one a second. Reported: fault -> cordon decision p50/p99 (CordonRecord.time - the fault's sent_at, as
    bench_coordinator measures it), the consumer lag of the coordinator's group every second and its trend
    over the last half, the simulators' achieved rate and late slots, and the CPU of each role.
(3) Ladder (``--ladder 2000,4000,...``; ``auto``, the default, runs 1/5..4/5 of ``--nodes`` only when (2) is not
    sustained, and 1/5..5/5 with ``--only ladder``): (2) at each size for ``--ladder-s`` seconds, and the largest fleet this machine sustains.

"Sustained" means: the simulators within 5 % of the target sample rate, the lag not growing over the last half
(a least-squares slope above 2 % of the sample rate with the fitted lag above 1 s of samples is growing) and
bounded (under 5 s of samples throughout the last half), every injected fault cordoned, decision p99 < 1 s.
Targets: the coordinator keeps up with 10,000 nodes x 8 GPUs at 1 Hz (catch-up headroom >= 1 and (2) sustained
at 10,000 nodes), lag bounded, fault -> cordon p99 < 1 s. A run below 10,000 nodes gives no verdict on the
target (``meets_target`` is null). Each phase and ladder step has its own broker, deleted after it.

``python -m tests.benchmarks.bench_capacity [--nodes 10000] [--minutes 3] [--quick]``; ``--quick`` (600 nodes,
0.5 minutes, short real-time phases) checks that it works in under two minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path

from myolo.common.keys import public_key_from_pem
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.coordinator import topic_specs
from myolo.events.settings import KafkaSettings
from myolo.events.topics import NODE_SAMPLES, ensure_topics
from tests.benchmarks.bench_coordinator import (
    GPUS,
    LagSampler,
    Watcher,
    _coordinator_config,
    _cpu_seconds,
    _lat_summary,
    enroll_fleet,
    wait_for_leader,
)
from tests.benchmarks.broker import benchmark_broker
from tests.benchmarks.capacity_children import proc_status_mb
from tests.benchmarks.common import write_result
from tests.support.helpers import new_ed25519_key

ROOT = Path(__file__).resolve().parents[2]
TARGET_NODES, RATE_HZ, TARGET_P99_S = 10_000, 1.0, 1.0
RATE_SHARE = 0.95  # the simulators must publish at least 95 % of the target sample rate
GROWTH_SHARE = 0.02  # lag rising faster than 2 % of the sample rate over the last half: falling behind
LAG_FLOOR_S = 1.0  # ...unless the fitted lag stays under 1 s of samples (commit timing, not a trend)
LAG_BOUND_S = 5.0  # the lag stays under 5 s of samples throughout the last half
ENROL_CLIENTS = 32  # parallel API clients enrolling node keys (10,000 PUTs)
PHASES = ("catchup", "realtime", "ladder")


# ---- the verdict (pure) ----------------------------------------------------------------------------------------
def lag_trend(samples: list[tuple[float, int]], rate: float) -> dict:
    """The consumer lag's least-squares slope over the last half of ``samples`` ((seconds, records) pairs), and
    whether it grows or stays bounded at ``rate`` records per second (``None``: too few points to say)."""
    half = samples[len(samples) // 2 :]
    if len(half) < 3:
        return {"points": len(half), "growing": None, "bounded": None}
    ts, ys = [float(t) for t, _ in half], [float(y) for _, y in half]
    mt, my = sum(ts) / len(ts), sum(ys) / len(ys)
    var = sum((t - mt) ** 2 for t in ts)
    slope = sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / var if var else 0.0
    fitted_end = my + slope * (ts[-1] - mt)
    return {
        "points": len(half),
        "slope_records_per_s": round(slope, 1),
        "slope_share_of_rate": round(slope / rate, 4),
        "fitted_end_records": round(fitted_end),
        "max_records": round(max(ys)),
        "growing": slope > GROWTH_SHARE * rate and fitted_end > LAG_FLOOR_S * rate,
        "bounded": max(ys) < LAG_BOUND_S * rate,
    }


def verdict(target_rate: float, achieved_rate: float, lag: dict, p99_ms: float | None, injected: int, cordoned: int):
    """Whether a real-time run was sustained, and which checks failed."""
    checks = {
        "simulators_within_5pct_of_rate": achieved_rate >= RATE_SHARE * target_rate,
        "lag_not_growing": lag.get("growing") is False,
        "lag_bounded": lag.get("bounded") is True,
        "every_fault_cordoned": injected > 0 and cordoned == injected,
        "fault_to_cordon_p99_under_1s": p99_ms is not None and p99_ms < TARGET_P99_S * 1000,
    }
    return {"sustained": all(checks.values()), "checks": checks, "failed": [k for k, ok in checks.items() if not ok]}


# ---- child processes ---------------------------------------------------------------------------------------------
def slices(nodes: int, procs: int) -> list[int]:
    procs = max(1, min(procs, nodes))
    return [nodes // procs + (1 if i < nodes % procs else 0) for i in range(procs)]


async def _spawn(mode: str, bootstrap: str, log: Path, **opts: object) -> asyncio.subprocess.Process:
    args = [sys.executable, "-m", "tests.benchmarks.capacity_children", mode, "--bootstrap", bootstrap]
    for k, v in opts.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    with log.open("w") as err:  # the child holds its own descriptor of the file
        proc = await asyncio.create_subprocess_exec(
            *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=ROOT
        )
    proc.log = log  # type: ignore[attr-defined]
    return proc


async def _result(proc: asyncio.subprocess.Process) -> dict:
    """The JSON the child printed last; its log's tail in the error when it failed."""
    out = await proc.stdout.read()  # type: ignore[union-attr]
    if await proc.wait() != 0:
        tail = proc.log.read_text()[-2000:]  # type: ignore[attr-defined]
        raise RuntimeError(f"child {proc.pid} exited with {proc.returncode}:\n{tail}")
    return json.loads(out.decode().strip().splitlines()[-1])


def _kill(procs: list[asyncio.subprocess.Process]) -> None:
    for p in procs:
        if p.returncode is None:
            p.kill()


def _topic_bytes(broker_home: Path, topic: str) -> int:
    return sum(f.stat().st_size for f in (broker_home / "data").glob(f"{topic}-*/*.log"))


class _Keys:
    """What enroll_fleet reads of a simulator (its nodes' public keys), from the children's PEM files."""

    def __init__(self, files: list[Path]) -> None:
        pems = {n: p for f in files for n, p in json.loads(f.read_text()).items()}
        self._keys = {n: public_key_from_pem(p, f"node {n}") for n, p in pems.items()}

    def public_keys(self) -> dict:
        return self._keys


# ---- (1) catch-up ------------------------------------------------------------------------------------------------
async def catch_up(
    bootstrap: str, broker_pid: int, broker_home: Path, nodes: int, minutes: float, procs: int, tmp: Path
):
    settings = KafkaSettings(bootstrap=bootstrap, client_id="bench-capacity")
    await ensure_topics(settings.client_kwargs(), topic_specs(COMPONENTS))
    rounds = max(1, round(minutes * 60 * RATE_HZ))
    t0 = time.perf_counter()
    fills = [
        await _spawn(
            "fill", bootstrap, tmp / f"fill{i}.log", nodes=n, gpus=GPUS, prefix=f"sim{i}-node-", seed=i, rounds=rounds
        )
        for i, n in enumerate(slices(nodes, procs))
    ]
    try:
        filled = await asyncio.gather(*(_result(p) for p in fills))
    finally:
        _kill(fills)
    fill_wall = time.perf_counter() - t0
    samples = sum(f["samples"] for f in filled)
    topic_bytes = _topic_bytes(broker_home, NODE_SAMPLES)
    key_file = tmp / "signing.key"
    new_ed25519_key(key_file)
    b0 = _cpu_seconds(broker_pid)
    consumer = await _spawn("consume", bootstrap, tmp / "consume.log", key_file=key_file, expected=samples)
    try:
        got = await _result(consumer)
    finally:
        _kill([consumer])
    rate, need = got["samples_per_s"], nodes * RATE_HZ
    return {
        "fill": {
            "processes": len(fills),
            "samples": samples,
            "fleet_minutes": round(rounds / RATE_HZ / 60, 2),
            "seconds_with_process_start": round(fill_wall, 1),
            "samples_per_s": round(samples / max(f["seconds"] for f in filled)),
            "send_errors": sum(f["send_errors"] for f in filled),
            "per_process": filled,
        },
        "samples_topic_bytes": topic_bytes,
        "samples_topic_bytes_per_sample": round(topic_bytes / samples, 1),
        "consumer": {"process": "in-process Coordinator (ingest_from=earliest) in a child process", **got},
        "nodes_in_view_equals_nodes": got["nodes_in_view"] == nodes,
        "cpu_per_core": round(got["cpu_s"] / got["seconds"], 3),
        "samples_per_cpu_s": round(got["samples"] / got["cpu_s"]) if got["cpu_s"] else None,
        "rss_kib_per_node": round((got["rss_mb_at_end"] - got["rss_mb_before_start"]) * 1024 / nodes, 1),
        "broker_cpu_s_during_consume": round(_cpu_seconds(broker_pid) - b0, 1),
        "realtime_need_samples_per_s": need,
        "headroom": round(rate / need, 2),
        "drains_one_minute_of_backlog_live_in_s": round(60 / (rate / need - 1), 1) if rate > need else None,
    }


# ---- (2) real time -----------------------------------------------------------------------------------------------
async def real_time(
    bootstrap: str,
    broker_pid: int,
    broker_home: Path,
    nodes: int,
    procs: int,
    duration: float,
    faults: int,
    warmup: float,
    tmp: Path,
) -> dict:
    settings = KafkaSettings(bootstrap=bootstrap, client_id="bench-capacity")
    await ensure_topics(settings.client_kwargs(), topic_specs(COMPONENTS))
    key_file = tmp / "signing.key"
    new_ed25519_key(key_file)
    instance = f"bench-cap-{uuid.uuid4().hex[:6]}"
    cfg = _coordinator_config(tmp, bootstrap, str(key_file), instance)
    sizes = slices(nodes, procs)
    faults = max(1, min(faults, sizes[0], int(duration - warmup - 5)))  # one a second, all inside the run
    with (tmp / "coordinator.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "myolo.coordinator.cli_daemon", "run", "--config", str(cfg), "--log-json"],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    sims: list[asyncio.subprocess.Process] = []
    watcher, lag = Watcher(settings), LagSampler(settings, f"myolo-coordinator-{instance}")
    lag_task: asyncio.Task | None = None
    try:
        for i, n in enumerate(sizes):
            opts = {"nodes": n, "gpus": GPUS, "rate": RATE_HZ, "prefix": f"sim{i}-node-", "seed": 100 + i}
            opts |= {"duration": duration, "keys": tmp / f"keys{i}.json"}
            if i == 0:
                opts |= {"faults": faults, "fault_every": 1.0, "warmup": warmup}
            sims.append(await _spawn("run", bootstrap, tmp / f"sim{i}.log", **opts))
        term = await wait_for_leader(settings, instance, proc)
        for s in sims:
            if (await s.stdout.readline()).strip() != b"ready":  # type: ignore[union-attr]
                await _result(s)  # raises with the child's log
        keys = _Keys([tmp / f"keys{i}.json" for i in range(len(sims))])
        enrol_s = await enroll_fleet(term.api_url, keys, parallel=ENROL_CLIENTS)
        await watcher.start()
        pids = {"coordinator": proc.pid, "broker": broker_pid, "benchmark_watcher": os.getpid()}
        cpu0, wall0, load0 = {k: _cpu_seconds(p) for k, p in pids.items()}, time.perf_counter(), os.getloadavg()[0]
        for s in sims:
            s.stdin.write(b"go\n")  # type: ignore[union-attr]
            await s.stdin.drain()  # type: ignore[union-attr]
        lag_task = asyncio.create_task(lag.run())
        outs = await asyncio.wait_for(asyncio.gather(*(_result(s) for s in sims)), duration + 120)
        lag_task.cancel()
        wall = time.perf_counter() - wall0
        cores = {k: round((_cpu_seconds(p) - cpu0[k]) / wall, 3) for k, p in pids.items()}
        sent = outs[0]["faults"]
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline and any(f["node_id"] not in watcher.cordons for f in sent):
            await asyncio.sleep(0.1)
        alive, load1 = proc.poll() is None, os.getloadavg()[0]
        coordinator_mem = proc_status_mb(proc.pid) if alive else {}
        topic_bytes = _topic_bytes(broker_home, NODE_SAMPLES)
    finally:
        if lag_task is not None:
            lag_task.cancel()
            await asyncio.gather(lag_task, return_exceptions=True)
        await watcher.stop()
        _kill(sims)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    decision, durable = [], []
    for f in sent:
        if (got := watcher.cordons.get(f["node_id"])) is not None:
            decision.append(got[0].time - f["sent_at"])
            durable.append(got[1] - f["sent_at"])
    dec = _lat_summary(decision)
    target = nodes * RATE_HZ
    achieved = sum(o["stats"]["samples_per_s"] for o in outs)
    trend = lag_trend(lag.samples, target)
    for i, o in enumerate(outs):
        cores[f"simulator_{i}"] = o["stats"]["cpu_share_of_one_core"]
    return {
        "nodes": nodes,
        "gpus_per_node": GPUS,
        "rate_hz": RATE_HZ,
        "seconds": round(wall, 1),
        "coordinator": {
            "process": "myolo-coordinator run (subprocess)",
            "epoch": term.epoch,
            "alive_at_end": alive,
            "rss_mb_at_end": coordinator_mem.get("VmRSS"),
            "rss_mb_peak": coordinator_mem.get("VmHWM"),
        },
        "node_keys_enrolled_over_api_s": round(enrol_s, 1),
        "simulators": {
            "processes": len(outs),
            "target_samples_per_s": target,
            "achieved_samples_per_s": round(achieved, 1),
            "achieved_share_of_target": round(achieved / target, 4),
            "slots": sum(o["stats"]["slots"] for o in outs),
            "late_slots": sum(o["stats"]["late_slots"] for o in outs),
            "max_lateness_s": max(o["stats"]["max_lateness_s"] for o in outs),
            "send_errors": sum(o["stats"]["send_errors"] for o in outs),
            "per_process": [{"prefix": o["prefix"], "nodes": o["nodes"], **o["stats"]} for o in outs],
        },
        "cpu_cores_used": cores,
        "machine_load_avg_1m": {"start": round(load0, 2), "end": round(load1, 2)},
        "faults_injected": len(sent),
        "cordoned": len(decision),
        "samples_topic_bytes_per_sample": round(topic_bytes / max(1, sum(o["stats"]["run_samples"] for o in outs)), 1),
        "fault_to_broker_ack": _lat_summary([f["ack_s"] for f in sent if f["ack_s"] is not None]),
        "fault_to_cordon_decision": dec,
        "fault_to_cordon_record_on_state_topic": _lat_summary(durable),
        "consumer_lag": {
            "records_every_s": lag.samples,
            "max_seconds_of_samples": round(max((v for _, v in lag.samples), default=0) / target, 2),
            "last_half": trend,
        },
        "verdict": verdict(target, achieved, trend, dec.get("p99_ms"), len(sent), len(decision)),
    }


def _step_summary(r: dict) -> dict:
    if "error" in r:
        return {"nodes": r["nodes"], "sustained": False, "error": r["error"]}
    return {
        "nodes": r["nodes"],
        "achieved_share_of_target": r["simulators"]["achieved_share_of_target"],
        "late_slots": r["simulators"]["late_slots"],
        "lag_slope_records_per_s": r["consumer_lag"]["last_half"].get("slope_records_per_s"),
        "lag_growing": r["consumer_lag"]["last_half"]["growing"],
        "lag_max_seconds_of_samples": r["consumer_lag"]["max_seconds_of_samples"],
        "fault_to_cordon_p99_ms": r["fault_to_cordon_decision"].get("p99_ms"),
        "coordinator_cores": r["cpu_cores_used"]["coordinator"],
        "sustained": r["verdict"]["sustained"],
        "failed": r["verdict"]["failed"],
    }


# ---- the run ---------------------------------------------------------------------------------------------------
def _failed(nodes: int, exc: Exception) -> dict:
    """A real-time run that did not finish (a child died, the simulators fell minutes behind): recorded, not fatal."""
    failed = {"sustained": False, "checks": {}, "failed": ["ran to the end"]}
    return {"nodes": nodes, "error": f"{type(exc).__name__}: {exc}"[-2000:], "verdict": failed}


def _realtime_on_fresh_broker(
    opts: argparse.Namespace, nodes: int, seconds: float, faults: int, warmup: float, tmp: Path
):
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        with benchmark_broker() as b:
            return asyncio.run(
                real_time(b.bootstrap, b.status().pid, b.home, nodes, opts.sim_procs, seconds, faults, warmup, tmp)
            )
    except Exception as exc:
        traceback.print_exc()
        return _failed(nodes, exc)


def run(opts: argparse.Namespace) -> dict:
    out: dict = {}
    seconds: dict[str, float] = {}
    sustained: list[int] = []
    with tempfile.TemporaryDirectory(prefix="myolo-bench-capacity-") as d:
        tmp = Path(d)
        if "catchup" in opts.phases:
            t0 = time.perf_counter()
            (tmp / "catchup").mkdir()
            with benchmark_broker() as b:  # its data (the whole backlog) goes with it
                args = (b.bootstrap, b.status().pid, b.home, opts.nodes, opts.minutes, opts.fill_procs, tmp / "catchup")
                out["catch_up"] = asyncio.run(catch_up(*args))
            seconds["catch_up"] = round(time.perf_counter() - t0, 1)
        if "realtime" in opts.phases:
            t0 = time.perf_counter()
            rt = _realtime_on_fresh_broker(opts, opts.nodes, opts.realtime_s, opts.faults, opts.warmup, tmp / "rt")
            out["real_time"] = rt
            if rt["verdict"]["sustained"]:
                sustained.append(opts.nodes)
            seconds["real_time"] = round(time.perf_counter() - t0, 1)
        ladder = opts.ladder
        if ladder == "auto":  # below a full fleet that was not sustained; the whole ladder when (2) did not run
            rt = out.get("real_time")
            upto = 5 if rt is None else 0 if rt["verdict"]["sustained"] else 4
            ladder = ",".join(str(opts.nodes * k // 5) for k in range(1, upto + 1))
        if "ladder" in opts.phases and ladder and ladder != "none":
            t0 = time.perf_counter()
            steps = []
            for n in [int(x) for x in ladder.split(",") if x.strip()]:
                r = _realtime_on_fresh_broker(opts, n, opts.ladder_s, opts.faults, opts.warmup, tmp / f"ladder-{n}")
                steps.append(_step_summary(r))
                if r["verdict"]["sustained"]:
                    sustained.append(n)
            out["ladder"] = steps
            seconds["ladder"] = round(time.perf_counter() - t0, 1)
    cu, rt = out.get("catch_up"), out.get("real_time")
    at_target = opts.nodes >= TARGET_NODES and cu is not None and rt is not None
    return {
        "target": {
            "nodes": TARGET_NODES,
            "gpus_per_node": GPUS,
            "rate_hz": RATE_HZ,
            "catch_up_headroom_at_least": 1.0,
            "lag": "bounded (not growing over the last half, under 5 s of samples)",
            "fault_to_cordon_p99_ms_under": TARGET_P99_S * 1000,
        },
        "options": {k: v for k, v in vars(opts).items() if k != "phases"} | {"phases": list(opts.phases)},
        **out,
        "largest_sustained_nodes": max(sustained, default=None),
        "meets_target": (cu["headroom"] >= 1.0 and rt["verdict"]["sustained"]) if at_target else None,
        "phase_seconds": seconds,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, help="fleet size (default 10000; 600 with --quick)")
    parser.add_argument("--minutes", type=float, help="fleet minutes of backlog to catch up (default 3; 0.5 quick)")
    parser.add_argument("--fill-procs", type=int, default=2, help="simulator processes filling the backlog")
    parser.add_argument("--sim-procs", type=int, default=2, help="simulator processes in the real-time phase")
    parser.add_argument("--realtime-s", type=float, help="seconds of the real-time phase (default 120; 30 quick)")
    parser.add_argument("--ladder", default="auto", help="fleet sizes, e.g. 2000,4000,6000,10000; auto; none")
    parser.add_argument("--ladder-s", type=float, help="seconds of each ladder step (default 60; 20 quick)")
    parser.add_argument("--faults", type=int, help="FAIL faults injected per real-time run, one a second")
    parser.add_argument("--only", choices=PHASES, action="append", help="run only this phase (repeatable)")
    parser.add_argument("--quick", action="store_true", help="small and short: does it work (< 2 min)")
    opts = parser.parse_args(argv)
    quick = opts.quick
    opts.nodes = opts.nodes or (600 if quick else TARGET_NODES)
    opts.minutes = opts.minutes if opts.minutes is not None else (0.5 if quick else 3.0)
    opts.realtime_s = opts.realtime_s or (30.0 if quick else 120.0)
    opts.ladder_s = opts.ladder_s or (20.0 if quick else 60.0)
    opts.faults = opts.faults or (10 if quick else 30)
    opts.warmup = 5.0 if quick else 15.0  # before the first fault: every node known, lag settled
    opts.phases = tuple(opts.only or PHASES)
    name = "capacity" + ("_quick" if quick else "") + ("_" + "_".join(opts.phases) if opts.only else "")
    write_result(name, run(opts))


if __name__ == "__main__":
    main()
