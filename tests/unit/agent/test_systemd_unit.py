"""The unit file passes `systemd-analyze verify` (with ExecStart pointed at this venv's interpreter) and has
what the agent needs of it: notify, watchdog, restart, state directory, hardening."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "systemd" / "myolo-agent.service"
INSTALLED = "/opt/myolo/venv/bin/myolo-agent-launcher"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
@pytest.mark.parametrize(
    ("name", "installed", "here"),
    [
        ("myolo-agent.service", INSTALLED, "-m myolo.agent.launcher"),
        ("myolo-coordinator.service", "/opt/myolo/venv/bin/myolo-coordinator", "-m myolo.coordinator.cli_daemon"),
    ],
)
def test_the_units_as_shipped_pass_systemd_analyze_verify(tmp_path, name: str, installed: str, here: str):
    """Verified as shipped, but for the program's path: /opt/myolo is not on this machine."""
    text = (ROOT / "systemd" / name).read_text()
    assert installed in text
    unit = tmp_path / name
    unit.write_text(text.replace(installed, f"{sys.executable} {here}"))
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    # verify exits 0 on unknown keys too, only warning about them: any line naming our unit is a failure
    assert name not in proc.stderr + proc.stdout, proc.stderr


def test_unit_has_notify_watchdog_restart_state_and_hardening():
    lines = {
        line.split("=", 1)[0]: line.split("=", 1)[1]
        for line in UNIT.read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    text = UNIT.read_text()
    assert lines["Type"] == "notify"
    assert lines["WatchdogSec"].endswith("s")
    assert lines["Restart"] == "on-failure"
    # the launcher restarts the agent; systemd restarts the launcher, within a start limit a person then sees
    assert lines["ExecStart"].startswith("/opt/myolo/venv/bin/myolo-agent-launcher ")
    assert lines["NotifyAccess"] == "main" and int(lines["StartLimitBurst"]) >= 3
    assert lines["StateDirectory"] == "myolo"
    assert lines["EnvironmentFile"].endswith("/etc/myolo/agent.env")
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
        assert lines[key] == "yes"
    assert lines["ProtectSystem"] == "strict"
    assert "DeviceAllow=/dev/nvidiactl rw" in text and "DeviceAllow=char-nvidia-frontend rw" in text
    assert lines.get("PrivateDevices", "no") == "no"  # yes would hide /dev/nvidia*


def test_a_stop_lets_the_agent_stop_its_workers_first():
    """SIGTERM goes to the agent alone (it checkpoints and stops its workers), and systemd waits longer than
    the agent's own stop sequence (the workers' stop timeout, then SIGTERM's grace) before it kills."""
    from myolo.agent.trainer.config import TrainerConfig

    lines = {
        line.split("=", 1)[0]: line.split("=", 1)[1]
        for line in UNIT.read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    assert lines["KillMode"] == "mixed"
    trainer = TrainerConfig()
    assert int(lines["TimeoutStopSec"].removesuffix("s")) > trainer.stop_timeout_s + trainer.term_grace_s + 5
    assert "MemoryMax" not in lines and "CPUQuota" not in lines  # the workers share the agent's cgroup
