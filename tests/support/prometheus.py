"""Debian's real ``prometheus`` and ``promtool`` for tests: a server on a free port over a given config, its
HTTP API (targets, instant queries), and ``promtool check metrics`` of a page."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.helpers import poll_until


def binary(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} is not installed: `make sysdeps` installs Debian's prometheus package"
    return found


@dataclass
class Prometheus:
    url: str

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=5) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]

    def targets(self) -> list[dict[str, Any]]:
        return self.get("/api/v1/targets")["activeTargets"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.get("/api/v1/query", query=expr)["result"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def prometheus(config: Path, data_dir: Path) -> Iterator[Prometheus]:
    """A Prometheus server over ``config``, answering; stopped (and waited for) on leaving."""
    port = _free_port()
    log = open(data_dir.parent / "prometheus.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            binary("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Prometheus(f"http://127.0.0.1:{port}")
    try:

        def ready() -> bool:
            assert proc.poll() is None, (data_dir.parent / "prometheus.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as resp:
                    return resp.status == 200
            except OSError:
                return False

        poll_until("prometheus to be ready", ready, 30)
        yield server
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def check_metrics(page: str) -> list[str]:
    """What ``promtool check metrics`` says of a Prometheus text page, one finding a line."""
    done = subprocess.run([binary("promtool"), "check", "metrics"], input=page.encode(), capture_output=True)
    return [line for line in done.stdout.decode().splitlines() + done.stderr.decode().splitlines() if line.strip()]
