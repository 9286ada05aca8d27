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
import myolo.agent.launcher.cli
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
        "myolo.agent.launcher",
        "myolo.agent.launcher.cli",
        "myolo.agent.launcher.inbox",
        "myolo.agent.launcher.state",
        "myolo.agent.launcher.supervise",
        "myolo.agent.notify",
        "myolo.agent.notify.notify",
        "myolo.agent.releases",
        "myolo.agent.releases.base",
        "myolo.agent.releases.config",
        "myolo.agent.releases.env",
        "myolo.agent.releases.errors",
        "myolo.agent.releases.fetch",
        "myolo.agent.releases.install",
        "myolo.agent.releases.restart",
        "myolo.agent.releases.store",
    }, agent_modules
    assert not [m for m in seen["modules"] if not m.startswith("agent")], seen["modules"]


def test_help_says_what_it_does() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "myolo.agent.launcher", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "releases.max_tries" in out.stdout and "commit" in out.stdout
