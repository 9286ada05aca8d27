"""A real `myolo-agent run` process for integration tests: its own config, a real sd_notify socket, a health
endpoint on a port the kernel picks when the agent binds (read back over the control socket), and helpers to
read what it published from the real broker."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from myolo.agent.control import ControlError, StatusRequest, call
from myolo.events.codec import decode
from myolo.events.envelope import Event
from myolo.events.settings import KafkaSettings
from tests.support.helpers import read_topic as read_records

ROOT = Path(__file__).resolve().parents[3]


class AgentProc:
    """`python -m myolo.agent run` with simulated GPUs against ``bootstrap``; notifications collected as they come."""

    def __init__(self, bootstrap: str, *, gpus: int = 2, interval_s: float = 0.25, extra_toml: str = "") -> None:
        self.node_id = f"it-{uuid.uuid4().hex[:8]}"
        self.dir = Path(tempfile.mkdtemp(prefix="mi-", dir="/tmp"))  # short: AF_UNIX paths
        self._port: int | None = None  # the health endpoint's, once the agent says which it got
        self.socket = self.dir / "agent.sock"
        self.spool_dir = self.dir / "spool"
        self.config = self.dir / "agent.toml"
        self.config.write_text(
            f"node_id = '{self.node_id}'\nsample_interval_s = {interval_s}\nsimulate_gpus = {gpus}\n"
            f"data_dir = '{self.dir}'\ncontrol_socket = '{self.socket}'\nlog_level = 'info'\n"
            f"[spool]\nmax_bytes = 67108864\nsegment_bytes = 1048576\n"
            f"[publish]\nsend_timeout_s = 3.0\nretry_max_s = 1.0\nready_timeout_s = 30.0\n"
            f"[health]\nport = 0\n[kafka]\nbootstrap = '{bootstrap}'\nclient_id = 'myolo-agent-it'\n" + extra_toml
        )
        self.notify_path = self.dir / "notify.sock"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.notify.setblocking(False)
        self.messages: list[dict[str, str]] = []
        self.proc: subprocess.Popen | None = None
        self._reader: asyncio.Task | None = None

    async def start(self, watchdog_usec: int = 2_000_000) -> None:
        env = {
            **os.environ,
            "NOTIFY_SOCKET": str(self.notify_path),
            "WATCHDOG_USEC": str(watchdog_usec),
            "PYTHONPATH": str(ROOT),
        }
        env.pop("WATCHDOG_PID", None)
        self.log = open(self.dir / "agent.log", "wb")  # noqa: SIM115 - closed in cleanup
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "myolo.agent", "run", "--config", str(self.config), "--log-text"],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self._reader = asyncio.create_task(self._read_notify())

    async def _read_notify(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            data = (await loop.sock_recv(self.notify, 4096)).decode()
            self.messages.append(dict(line.split("=", 1) for line in data.split("\n") if "=" in line))

    def kinds(self) -> list[str]:
        return [k for m in self.messages for k in m if k != "STATUS"]

    @property
    def port(self) -> int:
        """The health endpoint's port: the agent binds port 0 and reports the URL it got in its status."""
        if self._port is None:
            try:
                url = call(self.socket, StatusRequest()).data.get("health_url")
            except ControlError as exc:
                raise AssertionError(f"the agent's status is not available yet (wait for READY=1): {exc}") from None
            port = urlsplit(url).port if isinstance(url, str) else None
            if port is None:
                raise AssertionError(f"the agent reports no health endpoint port (yet): {url!r}")
            self._port = port
        return self._port

    def health(self, method: str = "GET") -> tuple[int, dict]:
        path = "/healthz" if method == "GET" else "/healthcheck"
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method, data=b"" if method == "POST" else None
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A ``myolo-agent`` command that talks to this agent over its control socket."""
        return self._run(*args, "--socket", str(self.socket))

    def cli_config(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A ``myolo-agent`` command that reads this agent's config file (``key show``)."""
        return self._run(*args, "--config", str(self.config))

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "myolo.agent", *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
        )

    def rss(self) -> int:
        import psutil

        assert self.proc is not None
        return psutil.Process(self.proc.pid).memory_info().rss

    def signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def log_text(self) -> str:
        return (self.dir / "agent.log").read_text(errors="replace")

    async def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._reader is not None:
            self._reader.cancel()
        self.notify.close()
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


async def read_topic(settings: KafkaSettings, topic: str, key: str) -> list[Event]:
    """Every event on ``topic`` keyed ``key``, in partition order (one key lives on one partition)."""
    return [decode(r.value, r.headers, r.key) for r in await read_records(settings, topic) if r.key == key.encode()]
