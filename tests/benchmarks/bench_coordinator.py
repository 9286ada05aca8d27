"""The coordinator under a simulated fleet: ingest throughput, fault-to-cordon latency, consumer lag.

(a) Ingest on one core: the same prefilled node samples (2,000 nodes x 8 GPUs, from the fleet simulator) are
    read by a bare aiokafka loop (untyped JSON decode, the least any consumer does) and by the coordinator's
    real ingest (the ``Coordinator`` with its components: EventConsumer with CloudEvents decoding, typed validation,
    dedupe, plausibility checks, fleet-view update and cordon policy), alternately, in this process pinned to
    one CPU, in 5 paired rounds of 120,000 samples each. Target: coordinator >= 80 % of the bare loop's
    samples/s, as the median of the rounds' ratios (the range is reported beside it).
(b) Fault to cordon: ``myolo-coordinator run`` as a real subprocess leads; the simulator publishes 2,000
    nodes x 8 GPUs at 1 Hz (spread over each second) with background WARN faults, and injects FAIL XIDs on
    distinct nodes. Measured from the moment each fault was handed to the producer to the cordon decision
    (the CordonRecord's time, stamped when the coordinator writes it), to the record on the state topic, and
    to the first command for that node on ``myolo.commands``. Target: p99 < 1 s. The simulated nodes sign their
    faults, so every node's key is first enrolled through the coordinator's API (``PUT /v1/nodes/{id}/key``).
(c) Consumer lag of the coordinator's group on the samples topic, sampled every second during (b).

All clocks compared are this machine's wall clock. Runs in about two to three minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from myolo.agent.fleetsim.simulator import FleetSimulator
from myolo.coordinator.api.config import ApiConfig
from myolo.coordinator.cli.client import ApiClient
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.config import default_config
from myolo.coordinator.cordons.records import STATE_NODES, CordonRecord
from myolo.coordinator.core.config import CoreConfig, SigningConfig
from myolo.coordinator.core.coordinator import Coordinator, state_codec, topic_specs
from myolo.coordinator.core.gc_tuning import tune_gc
from myolo.coordinator.core.leadership import TERM_KEY, LeaderTerm
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.fleet.config import FleetConfig
from myolo.coordinator.localstack.identity import enroll_nodes
from myolo.events.codec import decode
from myolo.events.payloads import Command
from myolo.events.settings import KafkaSettings
from myolo.events.topics import COMMANDS, NODE_SAMPLES, ensure_topics
from tests.benchmarks.broker import benchmark_broker
from tests.benchmarks.common import percentile, spread, write_result
from tests.support.helpers import new_ed25519_key

NODES, GPUS = 2000, 8
PREFILL_ROUNDS = 60  # 120,000 samples of 8 GPUs for the ingest comparison: rounds of several seconds
INGEST_ROUNDS = 5
WARMUP_S = 12.0  # load before the first injected fault: every node known, lag settled
FAULTS = 40  # injected FAIL faults, one per node, one every FAULT_EVERY_S
FAULT_EVERY_S = 1.0
BACKGROUND_FAULTS_PER_S = 0.5  # WARN-class XIDs, shown by the coordinator, not acted on
WARN_MIX = ((94, 0.6), (31, 0.3), (63, 0.1))
TARGET_RATIO, TARGET_P99_S = 0.8, 1.0
PARTS = ("ingest", "faults")  # ingest >= 0.8 of a bare loop; p99 < 1 s


# ---- (a) ingest throughput -------------------------------------------------------------------------------
async def prefill(settings: KafkaSettings) -> dict:
    sim = FleetSimulator(settings, NODES, GPUS, 1.0, 0.0, seed=7, run_id="prefill")
    await sim.start()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(PREFILL_ROUNDS):
        await sim.send_round()
    await sim.stop()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = sim.stats.samples_sent
    return {"samples": n, "seconds": round(wall, 2), "simulator_cpu_us_per_sample": round(cpu / n * 1e6, 1)}


async def bare_ingest(settings: KafkaSettings, expected: int, *, commit_behind: bool = False) -> dict:
    """What a hand-written consumer does at least: fetch, and JSON-decode each value (untyped), committing each
    batch. ``commit_behind``: the batch's commit runs while the next batch is decoded, as our consumer does."""
    consumer = AIOKafkaConsumer(
        NODE_SAMPLES,
        **settings.client_kwargs(),
        group_id=f"bare-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    json_decode = msgspec.json.decode
    n, t0, c0 = 0, 0.0, 0.0
    committing: asyncio.Task | None = None
    try:
        while n < expected:
            batches = await consumer.getmany(timeout_ms=200, max_records=500)
            for records in batches.values():
                if not n:
                    t0, c0 = time.perf_counter(), time.process_time()
                for r in records:
                    json_decode(r.value)
                n += len(records)
            if batches and not commit_behind:
                await consumer.commit()
            elif batches:
                if committing is not None:
                    await committing
                committing = asyncio.create_task(consumer.commit())
                for _ in range(3):
                    await asyncio.sleep(0)
        if committing is not None:
            await committing
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        await consumer.stop()
    return {"samples": n, "seconds": round(seconds, 3), "samples_per_s": round(n / seconds), "cpu_s": round(cpu, 2)}


def ingest_config(settings: KafkaSettings, key_file: str, instance: str) -> CoreConfig:
    """An in-process coordinator that reads the samples topic from the start, without its API."""
    return default_config(
        COMPONENTS,
        instance_id=instance,
        # the backlog is minutes old: keep liveness out of a throughput measurement
        fleet=FleetConfig(lost_after_s=3600.0, suspect_after_intervals=1000),
        ingest_from="earliest",
        api=ApiConfig(enabled=False),
        signing=SigningConfig(key_file=key_file),
        kafka=settings,
    )


async def coordinator_ingest(
    settings: KafkaSettings,
    key_file: str,
    expected: int,
    *,
    instance: str | None = None,
    at_end: Callable[[Coordinator], dict] | None = None,
) -> dict:
    """The real service, reading the same records from the start; timed (wall and this process's CPU) from
    its first handled sample. ``at_end(service)`` adds figures read while it still holds the whole fleet."""
    name = instance or f"bench-ingest-{uuid.uuid4().hex[:6]}"
    service = Coordinator(ingest_config(settings, key_file, name), COMPONENTS)
    runner = asyncio.create_task(service.run())
    stats = service.ingest.stats
    t0 = c0 = 0.0
    extra: dict = {}
    try:
        while stats.consumed < expected:
            if runner.done():
                runner.result()
            if not t0 and stats.consumed:
                t0, c0 = time.perf_counter(), time.process_time()
            await asyncio.sleep(0.002)  # polling a counter the consumer task moves
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        nodes = len(service.get(Fleet).view.nodes_by_id)
        if at_end is not None:
            extra = at_end(service)
    finally:
        service.request_stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(runner, 30)
    return {
        "samples": stats.consumed,
        "handled": stats.handled,
        "dead_lettered": stats.dead_lettered,
        "nodes_in_view": nodes,
        "seconds": round(seconds, 3),
        "samples_per_s": round(stats.consumed / seconds),
        "cpu_s": round(cpu, 2),
        **extra,
    }


async def ingest_comparison(settings: KafkaSettings, key_file: str) -> dict:
    filled = await prefill(settings)
    n = filled["samples"]
    cpus = os.sched_getaffinity(0)
    one = {max(cpus)}
    os.sched_setaffinity(0, one)  # one core for the consumer under test; the broker keeps the other
    tune_gc()  # the collector settings a coordinator runs with, for both loops from the first round
    try:
        await bare_ingest(settings, n)  # warm the broker's page cache and the JIT
        bares, behind, ours = [], [], []
        for _ in range(INGEST_ROUNDS):
            bares.append(await bare_ingest(settings, n))
            behind.append(await bare_ingest(settings, n, commit_behind=True))
            ours.append(await coordinator_ingest(settings, key_file, n))
    finally:
        os.sched_setaffinity(0, cpus)
    bare = sorted(bares, key=lambda r: r["samples_per_s"])[len(bares) // 2]
    mine = sorted(ours, key=lambda r: r["samples_per_s"])[len(ours) // 2]
    ratios = [o["samples_per_s"] / b["samples_per_s"] for b, o in zip(bares, ours, strict=True)]
    ratio = spread(ratios)["median"]
    behind_ratios = [o["samples_per_s"] / b["samples_per_s"] for b, o in zip(behind, ours, strict=True)]
    return {
        "prefill": filled,
        "pinned_to_cpu": sorted(one),
        "bare_loop_does": "aiokafka getmany + untyped msgspec JSON decode per record + commit per batch",
        "coordinator_does": "Coordinator ingest: CloudEvents decode + typed validation + dedupe + "
        "plausibility + FleetView.apply + cordon policy + commit per batch",
        "rounds_bare": bares,
        "rounds_bare_commit_behind": behind,
        "rounds_coordinator": ours,
        "bare_aiokafka": bare,
        "coordinator": mine,
        "ratio_per_round": [round(r, 3) for r in ratios],
        "ratio": spread(ratios),
        "throughput_ratio": ratio,  # the median of the paired rounds' ratios
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio >= TARGET_RATIO,
        # a stricter baseline: the bare loop with its commits overlapped too, as our consumer overlaps them
        "ratio_to_bare_commit_behind": spread(behind_ratios),
        "cpu_us_per_sample": {
            "bare": round(bare["cpu_s"] / bare["samples"] * 1e6, 1),
            "coordinator": round(mine["cpu_s"] / mine["samples"] * 1e6, 1),
        },
    }


# ---- (b) fault -> cordon -> command under load ----------------------------------------------------------
class Watcher:
    """Follows the state and command topics from their end; remembers the first cordon and command per node."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._kw = {**settings.client_kwargs(), "enable_auto_commit": False, "group_id": None}
        self.cordons: dict[str, tuple[CordonRecord, float, float]] = {}  # node -> (record, kafka ts, seen)
        self.commands: dict[str, list[tuple[Command, float, float]]] = {}  # every command, per node
        self._task: asyncio.Task | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        self._consumer = c = AIOKafkaConsumer(**self._kw)
        await c.start()
        parts = _parts(STATE_NODES, COMMANDS)
        c.assign(parts)
        await c.seek_to_end(*parts)
        for tp in parts:
            await c.position(tp)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=100, max_records=1000)
            seen = time.time()
            for records in batches.values():
                for r in records:
                    if r.topic == STATE_NODES and r.value is not None:
                        rec = STATE_CODEC.decode(r.value, r.headers)
                        if isinstance(rec, CordonRecord) and rec.cordoned:
                            self.cordons.setdefault(rec.node_id, (rec, r.timestamp / 1000, seen))
                    elif r.topic == COMMANDS:
                        cmd = decode(r.value, r.headers, r.key).data
                        if isinstance(cmd, Command):
                            self.commands.setdefault(cmd.node_id, []).append((cmd, r.timestamp / 1000, seen))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


class LagSampler:
    """Committed offsets of the coordinator's ingest group against the end of the samples topic."""

    def __init__(self, settings: KafkaSettings, group: str) -> None:
        self._settings, self._group = settings, group
        self.samples: list[tuple[float, int]] = []

    async def run(self, every_s: float = 1.0) -> None:
        admin = AIOKafkaAdminClient(**self._settings.client_kwargs())
        ends = AIOKafkaConsumer(**self._settings.client_kwargs(), enable_auto_commit=False)
        await admin.start()
        await ends.start()
        parts = _parts(NODE_SAMPLES)
        t0 = time.perf_counter()
        try:
            while True:
                committed = await admin.list_consumer_group_offsets(self._group, partitions=parts)
                end = await ends.end_offsets(parts)
                # before the group has committed on every partition there is no lag to speak of ("latest")
                if all(tp in committed and committed[tp].offset >= 0 for tp in parts):
                    lag = sum(end[tp] - committed[tp].offset for tp in parts)
                    self.samples.append((round(time.perf_counter() - t0, 1), lag))
                await asyncio.sleep(every_s)  # a sampling period on the wall clock: this is a benchmark
        finally:
            await ends.stop()
            await admin.close()


STATE_CODEC = state_codec(COMPONENTS)
BY_NAME = {t.name: t for t in topic_specs(COMPONENTS)}


def _parts(*topics: str) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in topics for p in range(BY_NAME[t].partitions)]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _coordinator_config(tmp: Path, bootstrap: str, key_file: str, instance: str) -> Path:
    cfg = tmp / "coordinator.toml"
    cfg.write_text(
        f'instance_id = "{instance}"\nlog_level = "warning"\n[api]\nport = 0\nauth = "none"\n'
        f'[signing]\nkey_file = "{key_file}"\n[kafka]\nbootstrap = "{bootstrap}"\n'
    )
    return cfg


async def wait_for_leader(
    settings: KafkaSettings, instance: str, proc: subprocess.Popen, timeout_s: float = 60
) -> LeaderTerm:
    from myolo.coordinator.core.leadership import STATE_COORDINATOR

    c = AIOKafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False, group_id=None)
    await c.start()
    try:
        parts = _parts(STATE_COORDINATOR)
        c.assign(parts)
        await c.seek_to_beginning(*parts)
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"myolo-coordinator exited with {proc.returncode} before it led")
            for records in (await c.getmany(timeout_ms=200)).values():
                for r in records:
                    if r.key == TERM_KEY.encode() and r.value:
                        term = STATE_CODEC.decode(r.value, r.headers)
                        if isinstance(term, LeaderTerm) and term.instance_id == instance:
                            return term
        raise TimeoutError(f"coordinator {instance} did not lead within {timeout_s:.0f} s")
    finally:
        await c.stop()


async def enroll_fleet(api_url: str, sim: FleetSimulator, parallel: int = 8) -> float:
    """Every simulated node's public key enrolled through the coordinator's API (``parallel`` clients), so its
    signed faults are taken; returns the seconds it took."""
    pems = [(n, k.pem()) for n, k in sim.public_keys().items()]
    t0 = time.perf_counter()
    await asyncio.gather(
        *(
            asyncio.to_thread(enroll_nodes, ApiClient([api_url], timeout=30), dict(pems[i::parallel]))
            for i in range(parallel)
        )
    )
    return time.perf_counter() - t0


def _lat_summary(values: list[float]) -> dict:
    ms = [v * 1000 for v in values]
    if not ms:
        return {"count": 0}
    return {
        "count": len(ms),
        "p50_ms": round(percentile(ms, 50), 1),
        "p99_ms": round(percentile(ms, 99), 1),
        "max_ms": round(max(ms), 1),
        "min_ms": round(min(ms), 1),
    }


async def fault_latency(settings: KafkaSettings, bootstrap: str, key_file: str, tmp: Path, broker_pid: int) -> dict:
    instance = f"bench-{uuid.uuid4().hex[:6]}"
    cfg = _coordinator_config(tmp, bootstrap, key_file, instance)
    log = (tmp / "coordinator.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "myolo.coordinator.cli_daemon", "run", "--config", str(cfg), "--log-json"],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).resolve().parents[2],
    )
    sim = FleetSimulator(settings, NODES, GPUS, 1.0, BACKGROUND_FAULTS_PER_S, seed=11, fault_mix=WARN_MIX)
    watcher = Watcher(settings)
    lag = LagSampler(settings, f"myolo-coordinator-{instance}")
    tasks: list[asyncio.Task] = []
    try:
        term = await wait_for_leader(settings, instance, proc)
        epoch = term.epoch
        enrolment_s = await enroll_fleet(term.api_url, sim)  # the nodes sign their faults: enrolled as an admin does
        await watcher.start()
        await sim.start()
        pids = {"coordinator": proc.pid, "broker": broker_pid, "benchmark_and_simulator": os.getpid()}
        cpu0, wall0, load0 = {k: _cpu_seconds(p) for k, p in pids.items()}, time.perf_counter(), os.getloadavg()[0]
        tasks.append(asyncio.create_task(sim.run()))
        tasks.append(asyncio.create_task(lag.run()))
        await asyncio.sleep(WARMUP_S)  # the load runs on the wall clock: this is what is measured
        step = NODES // FAULTS
        injected = []
        for i in range(FAULTS):
            xid = (79, 48)[i % 2]
            injected.append(await sim.inject_fault(i * step + 3, xid=xid, gpu=i % GPUS))
            await asyncio.sleep(FAULT_EVERY_S)
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline and len([f for f in injected if f.node_id in watcher.cordons]) < FAULTS:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # a command that follows a cordon has a moment to appear
        wall = time.perf_counter() - wall0
        cores = {k: round((_cpu_seconds(p) - cpu0[k]) / wall, 3) for k, p in pids.items()}
        load1 = os.getloadavg()[0]
        alive = proc.poll() is None
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await sim.stop()
        await watcher.stop()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    decision, durable, observed, command, command_kafka = [], [], [], [], []
    acked = [f.acked_perf - f.sent_perf for f in injected if f.acked_perf is not None]
    reasons: dict[str, int] = {}
    per_fault = []
    for f in injected:
        got = watcher.cordons.get(f.node_id)
        per_fault.append([f.node_id, f.xid, round(got[0].time - f.sent_at, 3) if got else None])
        if got is not None:
            rec, ts, seen = got
            decision.append(rec.time - f.sent_at)
            durable.append(ts - f.sent_at)
            observed.append(seen - f.sent_at)
            kind = "fault event" if rec.reason.startswith("FAIL xid") else rec.reason.split(":")[0]
            reasons[kind] = reasons.get(kind, 0) + 1
        # the first command for the node sent after the fault (a Suspect node may have had one before)
        cmd = next((c for c in watcher.commands.get(f.node_id, ()) if c[1] >= f.sent_at - 0.001), None)
        if cmd is not None:
            command.append(cmd[2] - f.sent_at)
            command_kafka.append(cmd[1] - f.sent_at)
    dec = _lat_summary(decision)
    lags = [v for _, v in lag.samples]
    third = max(1, len(lags) // 3)
    return {
        "coordinator": {"process": "myolo-coordinator run (subprocess)", "epoch": epoch, "alive_at_end": alive},
        "node_keys_enrolled_over_api_s": round(enrolment_s, 1),
        "cpu_cores_used": cores,
        "machine_load_avg_1m": {"start": round(load0, 2), "end": round(load1, 2)},
        "load": {
            "nodes": NODES,
            "gpus_per_node": GPUS,
            "rate_hz": 1.0,
            "samples_per_s": NODES,
            "background_warn_faults_per_s": BACKGROUND_FAULTS_PER_S,
            "seconds": round(wall, 1),
        },
        "simulator": sim.stats.as_dict(),
        "faults_injected": len(injected),
        "cordoned": len(decision),
        "cordon_triggered_by": reasons,
        "fault_to_broker_ack": _lat_summary(acked),
        "fault_to_cordon_decision": dec,
        "fault_to_cordon_record_on_state_topic": _lat_summary(durable),
        "fault_to_cordon_seen_by_a_reader": _lat_summary(observed),
        "fault_to_command_on_topic": _lat_summary(command_kafka),
        "fault_to_command_seen_by_a_reader": _lat_summary(command),
        "command_note": None if command else "the coordinator sent no command to a node it cordoned in this build",
        "per_fault_node_xid_decision_s": per_fault,
        "target_p99_ms": TARGET_P99_S * 1000,
        "meets_target": bool(decision) and len(decision) == len(injected) and dec["p99_ms"] < TARGET_P99_S * 1000,
        "consumer_lag": {
            "samples_topic_records": lag.samples,
            "max_records": max(lags, default=None),
            "max_seconds_of_samples": round(max(lags, default=0) / NODES, 2),
            "mean_first_third": round(sum(lags[:third]) / third, 1) if lags else None,
            "mean_last_third": round(sum(lags[-third:]) / third, 1) if lags else None,
            "bounded": bool(lags) and max(lags) < 5 * NODES,
        },
    }


async def run(bootstrap: str, broker_pid: int, parts: tuple[str, ...] = PARTS) -> dict:
    settings = KafkaSettings(bootstrap=bootstrap, client_id="bench-coordinator")
    await ensure_topics(settings.client_kwargs(), topic_specs(COMPONENTS))
    out: dict = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="myolo-bench-coord-") as d:
        tmp = Path(d)
        key_file = tmp / "signing.key"
        new_ed25519_key(key_file)
        if "ingest" in parts:
            t0 = time.perf_counter()
            out["ingest"] = await ingest_comparison(settings, str(key_file))
            seconds["ingest"] = round(time.perf_counter() - t0, 1)
        if "faults" in parts:
            t0 = time.perf_counter()
            out["fault_to_cordon"] = await fault_latency(settings, bootstrap, str(key_file), tmp, broker_pid)
            seconds["fault_to_cordon"] = round(time.perf_counter() - t0, 1)
    return {**out, "phase_seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=PARTS, help="run one part: ingest (a) or faults (b and c)")
    opts = parser.parse_args()
    parts = (opts.only,) if opts.only else PARTS
    name = "coordinator" if not opts.only else f"coordinator_{opts.only}"
    with benchmark_broker() as broker:
        write_result(name, asyncio.run(run(broker.bootstrap, broker.status().pid, parts)))


if __name__ == "__main__":
    main()
