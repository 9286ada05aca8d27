"""Toxiproxy (Shopify's fault-injecting TCP proxy) for the chaos tests: built once, run, and driven.

Built with ``go install`` from the Go module proxy into the project's cache (``MYOLO_CACHE_DIR``, else
``~/.cache/myolo``), a pinned version; started on loopback with its HTTP API on a free port; driven through
that API (proxies and their toxics). The machine's kernel has no ``netem``, so this is how the links to the
broker get latency, bandwidth limits, stalls and resets.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from myolo.coordinator.localstack.broker.jars import cache_root
from tests.support.helpers import free_port

MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
VERSION = "v2.5.0"


def binary() -> Path:
    """The toxiproxy server binary, built on first use (a minute, from the Go module proxy)."""
    home = cache_root() / "toxiproxy" / VERSION
    exe = home / "bin" / "toxiproxy-server"
    if exe.exists():
        return exe
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists():
        raise RuntimeError(
            "the chaos tests build Toxiproxy with Go; install Go 1.22 or newer (the brief's machine has it)"
        )
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOBIN": str(home / "bin"), "GOPATH": str(home / "gopath"), "GOFLAGS": "-modcacherw"}
    proc = subprocess.run([go, "install", f"{MODULE}@{VERSION}"], env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"go install {MODULE}@{VERSION} failed:\n{proc.stderr[-3000:]}")
    (home / "bin" / "server").rename(exe)
    shutil.rmtree(home / "gopath", ignore_errors=True)
    return exe


@dataclass
class Toxic:
    """One toxic as the API takes it; ``stream`` is upstream (to the broker) or downstream (from it)."""

    name: str
    type: str
    stream: str = "downstream"
    toxicity: float = 1.0
    attributes: dict[str, Any] = field(default_factory=dict)


class Toxiproxy:
    """A running toxiproxy server and its API."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "ab")  # noqa: SIM115  # closed in stop()
        self.proc = subprocess.Popen(
            [str(binary()), "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                self.call("GET", "/version")
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"toxiproxy did not answer on {self.url}; see {log}") from None
                time.sleep(0.1)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw, kind = resp.read(), resp.headers.get_content_type()
        return json.loads(raw) if raw and kind == "application/json" else raw.decode(errors="replace")

    def proxy(self, name: str, listen_port: int, upstream: str) -> None:
        self.call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{listen_port}", "upstream": upstream})

    def add(self, proxy: str, toxic: Toxic) -> None:
        self.call("POST", f"/proxies/{proxy}/toxics", toxic.__dict__)

    def remove(self, proxy: str, name: str) -> None:
        with contextlib.suppress(urllib.error.HTTPError):  # already gone
            self.call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def toxics(self, proxy: str) -> list[str]:
        return [t["name"] for t in self.call("GET", f"/proxies/{proxy}/toxics")]

    def clear(self, proxy: str) -> None:
        for name in self.toxics(proxy):
            self.remove(proxy, name)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
