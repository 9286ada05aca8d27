"""Real processes for integration tests (coordinators, agents, helpers), their logs, and their status files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from myolo.coordinator.localstack.health import settled_leader
from tests.support.helpers import new_ed25519_key

ROOT = Path(__file__).resolve().parents[3]


def start_coordinator(procs: Procs, tmp_path: Path, bootstrap: str, api: str, extra: str = "", name: str = "c") -> Path:
    """A ``myolo-coordinator run`` on an ephemeral API port with its own key and leader group; ``api``: the rest of
    its ``[api]`` section (tokens_file, or auth = "none"), ``extra``: more sections. Returns its status file
    (its api_url once it listens)."""
    tag = uuid.uuid4().hex[:6]
    key = tmp_path / "coordinator.key"
    new_ed25519_key(key)
    status_file = tmp_path / "status.json"
    (tmp_path / "coordinator.toml").write_text(
        f'instance_id = "{name}-{tag}"\ntick_s = 0.2\nstatus_file = "{status_file}"\n'
        f'[kafka]\nbootstrap = "{bootstrap}"\n[signing]\nkey_file = "{key}"\n[leader]\ngroup_id = "{name}-{tag}"\n'
        f"[api]\nport = 0\n{api}\n{extra}"
    )
    procs.start(
        "coordinator", ["-m", "myolo.coordinator.cli_daemon", "run", "--config", str(tmp_path / "coordinator.toml")]
    )
    return status_file


class Procs:
    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.running: dict[str, subprocess.Popen] = {}

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        out = (self.logs / f"{name}.log").open("w")
        p = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
        )
        self.running[name] = p
        return p

    def start_agent(
        self, name: str, node_id: str, bootstrap: str, data_dir: Path, gpus: int = 1, **env: str
    ) -> subprocess.Popen:
        """A ``myolo-agent run`` with simulated GPUs and no health endpoint; its node key lands in ``data_dir``."""
        base = {
            "MYOLO_KAFKA_BOOTSTRAP": bootstrap,
            "MYOLO_NODE_ID": node_id,
            "MYOLO_DATA_DIR": str(data_dir),
            "MYOLO_HEALTH_ENABLED": "false",
        }
        return self.start(name, ["-m", "myolo.agent", "run", "--simulate-gpus", str(gpus), "--log-json"], base | env)

    def signal(self, name: str, sig: int) -> None:
        self.running[name].send_signal(sig)

    def stop_all(self) -> None:
        for p in self.running.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in self.running.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def tail(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text()[-3000:]


def status(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def one_settled_leader(statuses: list[dict | None]) -> bool:
    """Every coordinator wrote its status, all name the same term, and leadership is settled (settled_leader)."""
    if not statuses or None in statuses:
        return False
    sts = [s for s in statuses if s is not None]
    same_term = len({json.dumps(s["leader"], sort_keys=True) for s in sts}) == 1
    return same_term and settled_leader(sts)
