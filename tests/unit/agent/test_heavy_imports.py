"""The agent daemon keeps numpy and pydantic out of its memory: each costs 10-20 MiB resident, and the agent's
budget is 80 MiB; nor does it load the OpenTelemetry SDK (3 MiB) when it exports nothing, as by default. The probe parses a real command line (typer coerces options there) and imports the `run` path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("numpy", "pydantic", "torch")

PROBE = r"""
import sys
sys.argv = ["myolo-agent", "sample", "--simulate-gpus", "2", "--json"]
import myolo.agent.daemon.assemble, myolo.agent.daemon.main, myolo.agent.daemon.watchers, myolo.agent.nccl.probe
from myolo.agent.cli import app
try:
    app()
finally:
    sdk = sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk"))
    sys.stderr.write("\nSDK=" + ",".join(sdk) + "\nLOADED=" + ",".join(sorted({m.split(".")[0] for m in sys.modules})) + "\n")
"""


def test_the_daemon_and_its_cli_load_no_numpy_pydantic_or_torch() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    loaded = proc.stderr.rpartition("\nLOADED=")[2].strip().split(",")
    assert len(loaded) > 20 and "myolo" in loaded, proc.stderr[-2000:]
    assert sorted(set(loaded) & set(HEAVY)) == []
    assert proc.stderr.rpartition("\nSDK=")[2].split("\n", 1)[0] == ""  # the SDK loads only to export
    assert '"backend":"sim"' in proc.stdout.replace(" ", ""), proc.stdout[:500]
