"""The child processes of ``bench_capacity``: slices of the simulated fleet, and the catch-up consumer.

Each is its own interpreter, so its CPU time and memory are its own (``/proc/<pid>``), and two simulator slices
use two cores. Every child ends by printing one JSON object as the last line of its stdout::

    python -m tests.benchmarks.capacity_children fill --bootstrap B --nodes N --prefix P --rounds R
    python -m tests.benchmarks.capacity_children run --bootstrap B --nodes N --prefix P --duration S --keys FILE
    python -m tests.benchmarks.capacity_children consume --bootstrap B --key-file K --expected N

``fill`` publishes ``rounds`` samples of each of its nodes as fast as it can (FleetSimulator.send_round), stamped
one period apart on a simulated clock that ends now.
``run`` writes its nodes' public keys (``{node id: PEM}``) to ``--keys``, prints ``ready``, waits for a line on
stdin, then publishes at ``--rate`` Hz for ``--duration`` seconds (FleetSimulator.run) and, with ``--faults``,
injects that many FAIL XIDs on distinct nodes of its slice, one every ``--fault-every`` s after ``--warmup`` s.
``consume`` runs the in-process ``Coordinator`` from the earliest offset until it has consumed ``--expected``
records, and reports its rate, CPU and memory with every node still in its fleet view.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

from myolo.agent.fleetsim.simulator import FleetSimulator, SentFault
from myolo.common.clock import Clock, SimClock
from myolo.events.settings import KafkaSettings

FAIL_XIDS = (79, 48)  # fell off the bus, double-bit ECC: both cordon a node at once


# ---- simulator slices -------------------------------------------------------------------------------------
def _sim(opts: argparse.Namespace, settings: KafkaSettings, clock: Clock | None = None) -> FleetSimulator:
    return FleetSimulator(
        settings,
        opts.nodes,
        opts.gpus,
        opts.rate,
        0.0,
        clock,
        seed=opts.seed,
        node_prefix=opts.prefix,
        run_id=opts.prefix,
    )


async def fill(opts: argparse.Namespace) -> dict:
    """The backlog of an outage that ended now: round ``r`` is stamped ``rounds - r`` periods ago (its events'
    own time, as the agents would have sent them), though the rounds are sent as fast as the broker takes them."""
    clock = SimClock(start=time.time() - opts.rounds / opts.rate)
    sim = _sim(opts, KafkaSettings(bootstrap=opts.bootstrap, client_id=f"capacity-fill-{opts.prefix}"), clock)
    await sim.start()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(opts.rounds):
        await sim.send_round()
        await clock.advance(sim.period)
    await sim.stop()  # flushes: every record is on the broker when this returns
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = sim.stats.samples_sent
    return {
        "prefix": opts.prefix,
        "nodes": opts.nodes,
        "samples": n,
        "send_errors": sim.stats.send_errors,
        "seconds": round(wall, 2),
        "samples_per_s": round(n / wall),
        "cpu_us_per_sample": round(cpu / n * 1e6, 1),
    }


def fault_targets(nodes: int, faults: int) -> list[int]:
    """``faults`` distinct node indices spread over ``0..nodes-1``."""
    faults = min(faults, nodes)
    step = max(1, nodes // max(1, faults))
    return [(i * step + min(3, step - 1)) % nodes for i in range(faults)]


async def _inject(sim: FleetSimulator, opts: argparse.Namespace) -> list[SentFault]:
    await asyncio.sleep(opts.warmup)  # the load runs on the wall clock: this is what is measured
    sent = []
    for i, n in enumerate(fault_targets(opts.nodes, opts.faults)):
        sent.append(await sim.inject_fault(n, xid=FAIL_XIDS[i % 2], gpu=i % opts.gpus))
        await asyncio.sleep(opts.fault_every)
    return sent


async def run(opts: argparse.Namespace) -> dict:
    sim = _sim(opts, KafkaSettings(bootstrap=opts.bootstrap, client_id=f"capacity-sim-{opts.prefix}"))
    Path(opts.keys).write_text(json.dumps({n: k.pem() for n, k in sim.public_keys().items()}))
    await sim.start()
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # the parent enrols the keys, then says go
    faults = asyncio.create_task(_inject(sim, opts)) if opts.faults else None
    await sim.run(opts.duration)
    sent = await faults if faults is not None else []
    await sim.stop()
    return {
        "prefix": opts.prefix,
        "nodes": opts.nodes,
        "stats": sim.stats.as_dict(),
        "faults": [
            {
                "node_id": f.node_id,
                "xid": f.xid,
                "sent_at": f.sent_at,
                "ack_s": None if f.acked_perf is None else f.acked_perf - f.sent_perf,
            }
            for f in sent
        ],
    }


# ---- the catch-up consumer ----------------------------------------------------------------------------------
def proc_status_mb(pid: int | str = "self") -> dict[str, float]:
    """A process's resident memory now (VmRSS) and at its peak (VmHWM), in MiB (this process's by default)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = round(int(value.split()[0]) / 1024, 1)  # kB
    return out


async def consume(opts: argparse.Namespace) -> dict:
    """bench_coordinator.coordinator_ingest's service (same config), measured from its first record to the
    ``expected``-th with CPU and memory read while it still holds the whole fleet in its view."""
    from tests.benchmarks.bench_coordinator import coordinator_ingest

    before = proc_status_mb()
    settings = KafkaSettings(bootstrap=opts.bootstrap, client_id="bench-capacity-consumer")

    def memory(_service: object) -> dict:
        mem = proc_status_mb()
        return {"rss_mb_before_start": before["VmRSS"], "rss_mb_at_end": mem["VmRSS"], "rss_mb_peak": mem["VmHWM"]}

    return await coordinator_ingest(
        settings, opts.key_file, opts.expected, instance=f"bench-capacity-{uuid.uuid4().hex[:6]}", at_end=memory
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("fill", "run", "consume"))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--nodes", type=int, default=0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--prefix", default="sim0-node-")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--keys", default="")
    parser.add_argument("--faults", type=int, default=0)
    parser.add_argument("--fault-every", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--key-file", default="")
    parser.add_argument("--expected", type=int, default=0)
    opts = parser.parse_args(argv)
    result = asyncio.run({"fill": fill, "run": run, "consume": consume}[opts.mode](opts))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
