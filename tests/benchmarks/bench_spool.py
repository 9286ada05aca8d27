"""The agent's spool: the segment files (``agent/spool``) against a SQLite candidate in WAL mode
(``spool_sqlite.py``) behind the same interface, at the agent's load and at a backlog, and under damage.

Each candidate runs in a fresh process per measurement, so its imports and memory are its own:

1. ``steady``: 1 Hz x 8 simulated GPUs. Each simulated second one node-sample record (an encoded 8-GPU
   ``NodeSample``, ~22 KB) is appended, read back (``peek``) and acknowledged (``commit``), with the deployed
   fsync policy (``interval``, 1 s), for ``STEADY_SECONDS``: CPU per record, the share of one core at 1 Hz,
   wall time per record, RSS before and after, bytes on disk.
2. ``backlog``: ``BACKLOG`` records appended as during an outage (the clock moves 1 ms per record, so the
   interval fsync runs every 1,000 records), the spool reopened (what a restart costs), then drained in
   publisher-sized batches: records/s and CPU per phase, RSS, peak RSS and bytes on disk.
3. ``damage`` (in this process): ``DAMAGE_RECORDS`` records written and closed, then for each of ``FLIPS``
   places one bit flipped in a fresh copy, the spool reopened and drained: records lost, losses the spool
   counted, records that came back altered, opens or reads that failed. The places are spread over every
   byte (``anywhere``) or over the bytes that hold the format together (``structure``).

``python -m tests.benchmarks spool``; the JSON goes to ``tests/benchmarks/results/spool.json``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from myolo.agent.gpu import SimBackend
from myolo.agent.gpu.sample import build_sample
from myolo.agent.health import HealthState
from myolo.agent.spool import Spool, SpoolRecord
from myolo.common.clock import SimClock
from myolo.events.codec import encode
from myolo.events.envelope import new_event
from myolo.events.topics import topic_for_type
from tests.benchmarks.common import write_result

GPUS = 8
STEADY_SECONDS = 3600
BACKLOG = 10_000
BATCH = 500  # the publisher's batch_records default
DAMAGE_RECORDS = 300
FLIPS = 40
MAX_BYTES = 256 << 20  # the agent's defaults
SEGMENT_BYTES = 4 << 20
KINDS = ("segments", "sqlite")
ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


class TickClock:
    """A clock the benchmark moves by hand (the spool only reads ``monotonic``)."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:  # pragma: no cover - the spool never sleeps
        raise AssertionError


def node_samples(n: int = 60) -> list[SpoolRecord]:
    """Encoded 8-GPU node samples, as the agent spools them."""
    clock = SimClock()
    backend = SimBackend(GPUS, clock, node_tag="bench")
    backend.open()
    health = HealthState(clock)
    out = []
    for i in range(n):
        clock._t += 1.0  # simulated readings move with simulated time
        event = new_event(build_sample(backend, "bench-node", health, seq=i), "/myolo/agent/bench-node", clock=clock)
        key, value, headers = encode(event)
        out.append(SpoolRecord(topic_for_type(event.type), key, value, headers))
    return out


def open_spool(kind: str, directory: Path, clock, fsync: str = "interval"):
    kw = {"max_bytes": MAX_BYTES, "segment_bytes": SEGMENT_BYTES, "fsync": fsync, "clock": clock}
    if kind == "segments":
        return Spool(directory, **kw)
    from tests.benchmarks.spool_sqlite import SqliteSpool  # imported here: its cost is the candidate's

    return SqliteSpool(directory, **kw)


def disk_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.is_file())


def rss_mib() -> float:
    return round(psutil.Process().memory_info().rss / MiB, 2)


def reset_peak_rss() -> None:
    """Start the peak over (Linux: ``5`` in clear_refs), so it counts from the phase's start, as ``rss_before``
    does, not from the worker's imports and record building."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_rss_mib() -> float:
    """The resident high-water mark since :func:`reset_peak_rss` (VmHWM). Not ``ru_maxrss``, which a process
    started by exec inherits from its parent: under ``make bench`` that is an earlier benchmark's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 2)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 2)


class Stopwatch:
    """CPU and wall time of a block."""

    def __enter__(self) -> Stopwatch:
        self.c0, self.w0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.cpu, self.wall = time.process_time() - self.c0, time.perf_counter() - self.w0


def feed(sp, records: list[SpoolRecord], clock: TickClock, n: int, step_s: float, *, send: bool) -> None:
    """Append ``n`` records ``step_s`` apart with the interval fsync, acknowledging each at once if ``send``."""
    for i in range(n):
        sp.append(records[i % len(records)])
        if sp.sync_due():
            sp.sync()
        if send:
            sp.commit(sp.peek(BATCH)[-1])
        clock.t += step_s


def steady(kind: str, directory: Path) -> dict:
    records, clock = node_samples(), TickClock()
    gc.collect()
    reset_peak_rss()
    rss0 = rss_mib()
    sp = open_spool(kind, directory, clock)
    with Stopwatch() as run:
        feed(sp, records, clock, STEADY_SECONDS, 1.0, send=True)
    result = {
        "records": STEADY_SECONDS,
        "record_bytes": len(records[0].value),
        "cpu_per_record_ms": round(1e3 * run.cpu / STEADY_SECONDS, 4),
        "cpu_share_of_one_core_at_1hz_pct": round(100 * run.cpu / STEADY_SECONDS, 4),
        "wall_per_record_ms": round(1e3 * run.wall / STEADY_SECONDS, 4),
        "rss_before_mib": rss0,
        "rss_after_mib": rss_mib(),
        "rss_added_mib": round(rss_mib() - rss0, 2),
        "disk_bytes": disk_bytes(directory),
    }
    sp.close()
    return result


def backlog(kind: str, directory: Path) -> dict:
    records, clock = node_samples(), TickClock()
    gc.collect()
    reset_peak_rss()
    rss0 = rss_mib()
    sp = open_spool(kind, directory, clock)
    with Stopwatch() as append:
        feed(sp, records, clock, BACKLOG, 0.001, send=False)
    appended_disk = disk_bytes(directory)
    sp.close()
    with Stopwatch() as reopen:
        sp = open_spool(kind, directory, clock)
    assert sp.pending == BACKLOG, (kind, sp.pending)
    drained = 0
    with Stopwatch() as drain:
        while entries := sp.peek(BATCH):
            drained += len(entries)
            sp.commit(entries[-1])
    assert drained == BACKLOG and sp.pending == 0, (kind, drained)
    result = {
        "records": BACKLOG,
        "append_records_per_s": round(BACKLOG / append.wall),
        "append_cpu_s": round(append.cpu, 3),
        "reopen_ms": round(1e3 * reopen.wall, 1),
        "reopen_cpu_ms": round(1e3 * reopen.cpu, 1),
        "drain_records_per_s": round(BACKLOG / drain.wall),
        "drain_cpu_s": round(drain.cpu, 3),
        "disk_bytes_with_backlog": appended_disk,
        "disk_bytes_after_drain": disk_bytes(directory),
        "rss_before_mib": rss0,
        "rss_after_mib": rss_mib(),
        "rss_peak_mib": peak_rss_mib(),
    }
    sp.close()
    return result


def worker(scenario: str, kind: str) -> dict:
    directory = Path(tempfile.mkdtemp(prefix="mb-spool-", dir="/tmp"))
    try:
        return {"steady": steady, "backlog": backlog}[scenario](kind, directory / "spool")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def in_fresh_process(scenario: str, kind: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bench_spool", "--worker", scenario, kind],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def damage(kind: str, where: str) -> dict:
    """One bit flipped at each of FLIPS places, each in a fresh copy of a closed spool: ``anywhere`` spreads
    them evenly over the files' bytes (nearly all land in record bodies); ``structure`` spreads them over what
    holds the format together: frame headers for segments, b-tree and overflow page headers for SQLite."""
    records = node_samples(DAMAGE_RECORDS)
    by_id = {dict(r.headers)["ce_id"]: r for r in records}
    base = Path(tempfile.mkdtemp(prefix="mb-spool-", dir="/tmp"))
    try:
        pristine = base / "pristine"
        sp = open_spool(kind, pristine, TickClock(), fsync="never")
        for r in records:
            sp.append(r)
        sp.close()
        places = _evenly(_places(kind, pristine) if where == "structure" else _Bytes(pristine), FLIPS)
        tally = {"lost": 0, "lost_and_counted": 0, "lost_uncounted": 0, "altered_returned": 0, "raised": 0}
        worst = 0
        for k in range(FLIPS):
            name, offset = places[k]
            copy = base / f"flip-{k}"
            shutil.copytree(pristine, copy)
            data = bytearray((copy / name).read_bytes())
            data[offset] ^= 1 << (k % 8)
            (copy / name).write_bytes(bytes(data))
            good, altered, counted, raised = _reopen_and_drain(kind, copy, by_id)
            lost = DAMAGE_RECORDS - good - altered
            tally["lost"] += lost
            tally["lost_and_counted"] += min(lost, counted)
            tally["lost_uncounted"] += max(0, lost - counted)
            tally["altered_returned"] += altered
            tally["raised"] += raised
            worst = max(worst, lost + altered)
            shutil.rmtree(copy)
        return {"records": DAMAGE_RECORDS, "flips": FLIPS, "where": where, **tally, "worst_flip_cost": worst}
    finally:
        shutil.rmtree(base, ignore_errors=True)


class _Bytes:
    """Every byte of the spool's data files (the cursor aside) as a sequence of (file name, offset)."""

    def __init__(self, directory: Path) -> None:
        self.files = [(p.name, p.stat().st_size) for p in sorted(directory.iterdir()) if p.name != "cursor"]

    def __len__(self) -> int:
        return sum(size for _, size in self.files)

    def __getitem__(self, at: int) -> tuple[str, int]:
        for name, size in self.files:
            if at < size:
                return name, at
            at -= size
        raise IndexError(at)


def _evenly(places, n: int) -> list[tuple[str, int]]:
    return [places[int((k + 0.5) * len(places) / n)] for k in range(n)]


def _places(kind: str, directory: Path) -> list[tuple[str, int]]:
    """The bytes that hold the format together."""
    if kind == "segments":
        from myolo.agent.spool.record import HEADER
        from myolo.agent.spool.segment import SegmentFile

        out = []
        for path in sorted(directory.glob("seg-*.spool")):
            with SegmentFile(path, path.stat().st_size) as fh:
                out += [(path.name, f.start + i) for f in fh.frames(0) for i in range(HEADER.size)]
        return out
    db = directory / "spool.db"
    page = 4096  # SQLite's default page size
    # each page's header (after the 100-byte file header on page 1): b-tree page headers and overflow links
    return [(db.name, p + (100 if p == 0 else 0) + i) for p in range(0, db.stat().st_size, page) for i in range(12)]


def _reopen_and_drain(kind: str, directory: Path, by_id: dict[bytes, SpoolRecord]) -> tuple[int, int, int, int]:
    """(records back intact, records back altered, losses the spool counted, 1 if opening or reading raised)."""
    good = altered = 0
    try:
        sp = open_spool(kind, directory, TickClock(), fsync="never")
        while entries := sp.peek(BATCH):
            for e in entries:
                original = by_id.get(dict(e.record.headers).get("ce_id", b""))
                if original == e.record:
                    good += 1
                else:
                    altered += 1
            sp.commit(entries[-1])
        counted = sp.stats().dropped
        sp.close()
    except Exception:
        return good, altered, 0, 1
    return good, altered, counted, 0


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], sys.argv[3])))
        return
    results: dict[str, dict] = {kind: {} for kind in KINDS}
    for scenario in ("steady", "backlog"):
        for kind in KINDS:
            results[kind][scenario] = in_fresh_process(scenario, kind)
    for kind in KINDS:
        results[kind]["damage_anywhere"] = damage(kind, "anywhere")
        results[kind]["damage_structure"] = damage(kind, "structure")
    seg, sql = results["segments"]["steady"], results["sqlite"]["steady"]
    write_result(
        "spool",
        {
            "gpus": GPUS,
            "interval_s": 1.0,
            "fsync": "interval (1 s)",
            "segments": results["segments"],
            "sqlite_wal": results["sqlite"],
            "sqlite_vs_segments": {
                "steady_cpu_ratio": round(sql["cpu_per_record_ms"] / seg["cpu_per_record_ms"], 2),
                "steady_rss_added_mib_difference": round(sql["rss_after_mib"] - seg["rss_after_mib"], 2),
                "drain_throughput_ratio": round(
                    results["sqlite"]["backlog"]["drain_records_per_s"]
                    / results["segments"]["backlog"]["drain_records_per_s"],
                    2,
                ),
            },
            "agent_budget": {"cpu_share_pct": 1.0, "rss_mib": 80},
        },
    )


if __name__ == "__main__":
    main()
