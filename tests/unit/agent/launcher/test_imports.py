"""The launcher stands outside the releases it takes back: it imports none of the daemon, nor Kafka, nor torch,
so a release broken anywhere in those cannot break the way back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
PROBE = """
import json, sys
import agent.launcher.cli
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("agent", "aiokafka", "torch", "zmq", "psutil", "typer"))
print(json.dumps({"modules": mods}))
"""


def test_the_launcher_imports_nothing_of_the_daemon() -> None:
    out = subprocess.run(
        [sys.executable, "-P", "-c", PROBE], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    agent_modules = {m for m in seen["modules"] if m.startswith("agent")}
    assert agent_modules <= {
        "agent",
        "agent.launcher",
        "agent.launcher.cli",
        "agent.launcher.inbox",
        "agent.launcher.state",
        "agent.launcher.supervise",
        "agent.notify",
        "agent.notify.notify",
        "agent.releases",
        "agent.releases.base",
        "agent.releases.config",
        "agent.releases.env",
        "agent.releases.errors",
        "agent.releases.fetch",
        "agent.releases.install",
        "agent.releases.restart",
        "agent.releases.store",
    }, agent_modules
    assert not [m for m in seen["modules"] if not m.startswith("agent")], seen["modules"]


def test_help_says_what_it_does() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agent.launcher", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "releases.max_tries" in out.stdout and "commit" in out.stdout
