"""The agent never imports torch: `myolo-agent sample --json` runs in a subprocess whose import system records
every attempt to import torch (even a guarded `try: import torch`) and reports them at exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = r"""
import atexit, sys

attempts = []

class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            attempts.append(name)
        return None  # let the real finders decide; we only watch

sys.meta_path.insert(0, Recorder())

@atexit.register
def report():
    sys.stderr.write("\nTORCH-ATTEMPTS=" + ",".join(attempts) + "\n")
    sys.stderr.write("TORCH-LOADED=" + str(any(m == "torch" or m.startswith("torch.") for m in sys.modules)) + "\n")

sys.argv = ["myolo-agent"] + sys.argv[1:]
from myolo.agent.cli import app
app()
"""


def run_agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_sample_json_never_imports_torch():
    proc = run_agent("sample", "--simulate-gpus", "2", "--json")
    assert "TORCH-ATTEMPTS=\n" in proc.stderr, proc.stderr
    assert "TORCH-LOADED=False" in proc.stderr, proc.stderr
    sample = json.loads(proc.stdout)
    assert sample["backend"] == "sim" and len(sample["gpus"]) == 2
    assert proc.returncode in (0, 1), proc.stderr  # 1 only if a simulated GPU is unhealthy


def test_the_daemon_modules_never_import_torch():
    """The `run` path (daemon, publisher, NCCL, leak, health endpoint) is imported, not just `sample`."""
    code = (
        "import sys, myolo.agent.cli, myolo.agent.daemon.main, myolo.agent.daemon.watchers, myolo.agent.nccl.probe;"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
