"""A real ``myolo-train`` run of a 2-layer ``tiny`` on 2 CPU processes, its ``--json`` records parsed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BASE = ["--nproc", "2", "--model", "tiny", "--model-arg", "n_layers=2", "--global-batch", "8", "--seq-len", "32"]


def run(*flags: str) -> subprocess.CompletedProcess[str]:
    """The finished run (exit 0 asserted): its stdout holds the records, its stderr every rank's log."""
    cmd = [sys.executable, "-m", "myolo.kernels.cli.launch", *BASE, "--device", "cpu", "--json", *flags]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def records(done: subprocess.CompletedProcess[str]) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def train(*flags: str) -> list[dict]:
    return records(run(*flags))
