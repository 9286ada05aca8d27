"""The elastic benchmark: a node fault -> the first step of the job's next generation, and goodput under a node
fault every two minutes, for Myolotrain and for torchrun elastic, in the same run on the same machine.

The job is the same on both sides (``elastic_torchrun.ELASTIC_JOB``: tiny, global batch 12, seq 64, a
checkpoint every 20 steps, no host-memory snapshots): three "nodes" with one worker each, the fault after
step 30 on a node that is not rank 0's (torchrun's store host is spared). Writes results/elastic.json;
``--short`` runs the goodput part over 60 s with a fault every 25 s.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from tests.benchmarks.common import write_result
from tests.benchmarks.elastic_myolo import run_myolo_failover, run_myolo_goodput
from tests.benchmarks.elastic_torchrun import (
    ELASTIC_JOB,
    rdzv_defaults,
    run_torchrun_failover,
    run_torchrun_goodput,
    with_fields,
)


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return round(ours / theirs, 3) if ours and theirs else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="goodput over 60 s with a fault every 25 s")
    ap.add_argument("--skip-goodput", action="store_true")
    args = ap.parse_args()
    t0 = time.monotonic()
    out: dict[str, Any] = {"job": msgspec.to_builtins(ELASTIC_JOB)}
    with tempfile.TemporaryDirectory(prefix="myolo-elastic-") as tmp:
        base = Path(tmp)
        ours = {
            fault: run_myolo_failover(base / f"m-{fault}", fault, ELASTIC_JOB, warm_steps=30)
            for fault in ("xid", "kill")
        }
        theirs = {
            name: run_torchrun_failover(base / f"t-{name}", share_store=share)
            for name, share in (("store_not_shared", False), ("store_shared", True))
        }
        t_kill = theirs["store_not_shared"]["from_fault_s"]["first_step"]
        out["failover"] = {
            "myolo": ours,
            "torchrun": theirs,
            "fault_to_first_step_s": {
                "myolo_xid": ours["xid"]["fault_to_first_step_s"],
                "myolo_kill": ours["kill"]["fault_to_first_step_s"],
                "torchrun_kill_store_not_shared": t_kill,
                "torchrun_kill_store_shared": theirs["store_shared"]["from_fault_s"]["first_step"],
                "ratio_kill_myolo_over_torchrun": _ratio(ours["kill"]["fault_to_first_step_s"], t_kill),
            },
        }
        if not args.skip_goodput:
            span = (60.0, 25.0) if args.short else (300.0, 120.0)
            long_job = with_fields(ELASTIC_JOB, {"optimizer.steps": 100_000})
            g_ours = run_myolo_goodput(base / "m-goodput", long_job, *span)
            g_theirs = run_torchrun_goodput(base / "t-goodput", *span)
            out["goodput"] = {
                "duration_s": span[0],
                "fault_every_s": span[1],
                "myolo": g_ours,
                "torchrun": g_theirs,
                "share": {
                    "myolo": g_ours["goodput"]["share"],
                    "torchrun": (g_theirs.get("goodput") or {}).get("share"),
                },
            }
    out["rendezvous_defaults"] = rdzv_defaults()
    out["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    out["total_s"] = round(time.monotonic() - t0, 1)
    write_result("elastic", out)


if __name__ == "__main__":
    main()
