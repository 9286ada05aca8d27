"""A million samples with made-up node ids through the coordinator's ingest path keep resident memory bounded:
the fleet view stops at ``fleet.max_nodes`` (the rest are flagged and counted), the duplicate window at its
bounds. Run in a process of its own (``flood.py``), so the figure is the ingest path's, not the test runner's.
Measured: it levels off near 112 MiB (2 million records: flat from 800,000 on)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RECORDS = 1_000_000
RSS_LIMIT_MIB = 160  # stated in docs/benchmarks.md


def test_a_million_made_up_nodes_leave_memory_bounded() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tests.support.coordinator.flood", str(RECORDS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=540,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["records"] == result["handled"] == RECORDS and result["dead_lettered"] == 0
    assert result["nodes_kept"] == result["max_nodes"] == 10_000
    assert result["nodes_refused"] == RECORDS - 10_000  # every other node flagged and counted, none kept
    assert max(result["rss_mib_by_tenth"]) < RSS_LIMIT_MIB, result
