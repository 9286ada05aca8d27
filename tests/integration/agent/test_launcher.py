"""The launcher takes a release that never commits itself back, from outside that release's code.

Real processes: ``python -m myolo.agent.launcher`` from this tree, starting the agent from a release directory the
way it starts a real one (``python -P -m myolo.agent run`` with ``<releases>/agent/current`` first on PYTHONPATH).
The releases here are small ``agent`` packages that behave as a broken or a good agent does on the
notification socket: one raises at import, one never commits, one goes READY and then hangs, one works (READY,
commit, watchdog pets, exits 0 on SIGTERM). The real agent's releases are tested on the local stack
(``tests/integration/coordinator/test_bad_release.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from myolo.agent.launcher import state as trial
from myolo.agent.releases.store import ReleaseStore
from tests.support.helpers import poll_until

ROOT = Path(__file__).resolve().parents[3]

FAKE_AGENT = """\
import os, signal, socket, sys, time
MODE, VERSION = {mode!r}, {version!r}
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(" ".join([VERSION, "start", os.environ.get("MYOLO_RELEASES_REPORT_ROLLBACK", "-"),
                        os.environ.get("MYOLO_RELEASES_RESTART", "-"), str(os.getpid())]) + "\\n")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
address = b"\\0" + os.environ["NOTIFY_SOCKET"][1:].encode()
def say(text):
    sock.sendto(text.encode(), address)
if MODE == "crash":
    raise RuntimeError("this release is broken at import")
if MODE == "silent":  # stops cleanly when told, as the real agent does: still a failed start
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        say("WATCHDOG=1")
        time.sleep(0.1)
if MODE == "hang":
    say("READY=1")
    time.sleep(3600)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
say("READY=1\\nSTATUS=fake agent")
say("X_MYOLO_COMMIT=1")
while True:
    say("WATCHDOG=1")
    time.sleep(0.1)
"""


def _release(store: ReleaseStore, version: str, mode: str) -> None:
    pkg = store.path(version) / "myolo" / "agent"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(FAKE_AGENT.format(mode=mode, version=version))
    info = {"version": version, "sha256": "0" * 64, "installed_at": time.time(), "artifact": f"{version}.whl"}
    (store.path(version) / "release.json").write_text(json.dumps(info))


class Node:
    """A launcher over a releases directory, its output in ``launcher.log``, the agents' starts in ``starts``."""

    def __init__(self, tmp: Path, **releases: float) -> None:
        self.tmp = tmp
        self.store = ReleaseStore(tmp / "releases", "agent")
        self.starts = tmp / "starts"
        cfg = {"commit_timeout_s": 3.0, "watchdog_s": 1.5, "restart_delay_s": 0.1, "max_tries": 3, **releases}
        lines = [f'dir = "{tmp / "releases"}"'] + [f"{k} = {v}" for k, v in cfg.items()]
        (tmp / "agent.toml").write_text("[releases]\n" + "\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None

    def start(self, **extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MYOLO_", "NOTIFY_", "WATCHDOG_"))}
        env |= {"PYTHONPATH": str(ROOT), "FAKE_LOG": str(self.starts), **extra}
        self.log = open(self.tmp / "launcher.log", "ab")  # noqa: SIM115  # closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "myolo.agent.launcher", "--config", str(self.tmp / "agent.toml"), "--log-json"],
            cwd=self.tmp,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def lines(self) -> list[list[str]]:
        return [line.split() for line in self.starts.read_text().splitlines()] if self.starts.exists() else []

    def output(self) -> str:
        return (self.tmp / "launcher.log").read_text(errors="replace")

    def state(self) -> trial.TrialState | None:
        return trial.load(self.store.dir / trial.TRIAL_FILE)

    def committed(self, version: str) -> bool:
        state = self.state()
        return state is not None and state.committed == version and not state.on_trial

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.log.close()


@pytest.fixture
def node(tmp_path: Path):
    made: list[Node] = []

    def make(**cfg: float) -> Node:
        made.append(Node(tmp_path, **cfg))
        return made[-1]

    yield make
    for n in made:
        if n.proc is not None and n.proc.poll() is None:
            n.proc.kill()
            n.proc.wait()


def _upgraded(n: Node, good: str, bad: str, mode: str) -> None:
    """The node committed ``good``, then an upgrade switched ``current`` to ``bad``."""
    _release(n.store, good, "good")
    _release(n.store, bad, mode)
    n.store.switch(good)
    trial.save(n.store.dir / trial.TRIAL_FILE, trial.TrialState(committed=good))
    n.store.switch(bad)


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("crash", "RuntimeError: this release is broken at import"),
        ("silent", "did not commit itself within 3 s"),
        ("hang", "watchdog: no sign of life from the agent"),
    ],
)
def test_a_release_that_never_commits_is_taken_back_after_max_tries(node, mode: str, why: str) -> None:
    n = node()
    _upgraded(n, "4.0.0", "4.0.9", mode)
    began = time.monotonic()
    n.start()
    poll_until("the node back on 4.0.0", lambda: n.store.current() == "4.0.0" and len(n.lines()) >= 4, 60)
    took = time.monotonic() - began
    starts = n.lines()
    assert [s[0] for s in starts[:4]] == ["4.0.9"] * 3 + ["4.0.0"]
    # the first start after the restore is told to report it; every start is told to exit 75 for a restart
    assert [s[2] for s in starts[:4]] == ["-", "-", "-", "1"] and {s[3] for s in starts} == {"exit"}
    state = poll_until("the restored release committed", lambda: n.committed("4.0.0") and n.state(), 30)
    failed = state.failed
    assert failed is not None
    assert (failed.component, failed.version, failed.restored, failed.tries) == ("agent", "4.0.9", "4.0.0", 3)
    assert why in f"{failed.reason}\n{failed.error}", failed
    assert n.store.previous() == "4.0.9"
    assert n.stop() == 0
    print(f"\n{mode}: back on the committed release {took:.1f} s after the launcher started")


def test_a_good_release_commits_and_is_not_tried_again(node) -> None:
    n = node()
    _upgraded(n, "4.0.0", "4.1.0", "good")
    n.start()
    poll_until("4.1.0 committed", lambda: n.committed("4.1.0"), 30)
    assert n.stop() == 0
    n.start()  # started again later: no trial, no count
    poll_until("the second start", lambda: len(n.lines()) == 2, 30)
    assert n.state() == trial.TrialState(committed="4.1.0")
    assert n.stop() == 0
    assert [s[0] for s in n.lines()] == ["4.1.0", "4.1.0"]


def test_a_committed_agent_that_crashes_is_started_again_and_a_stop_ends_both(node) -> None:
    n = node()
    _release(n.store, "4.0.0", "good")
    n.store.switch("4.0.0")
    n.start()
    first = poll_until("the agent", lambda: n.lines() and int(n.lines()[0][4]), 30)
    os.kill(first, signal.SIGKILL)  # a crash of a committed release: started again, never taken back
    second = poll_until("the agent again", lambda: len(n.lines()) == 2 and int(n.lines()[1][4]), 30)
    assert second != first and n.store.current() == "4.0.0"
    assert n.stop() == 0
    poll_until("the agent gone", lambda: not Path(f"/proc/{second}").exists(), 30)
    assert "killed by SIGKILL" in n.output()


def test_the_agent_dies_with_its_launcher(node) -> None:
    n = node()
    _release(n.store, "4.0.0", "good")
    n.store.switch("4.0.0")
    n.start()
    agent = poll_until("the agent", lambda: n.lines() and int(n.lines()[0][4]), 30)
    assert n.proc is not None
    n.proc.kill()
    n.proc.wait()
    poll_until("the agent gone with its launcher", lambda: not _alive(agent), 30)
    n.log.close()


def test_only_the_agent_it_started_speaks_for_the_launcher(node) -> None:
    """A commit sent by another process (any local user can reach an abstract socket) is dropped."""
    n = node(commit_timeout_s=4.0)
    _upgraded(n, "4.0.0", "4.0.9", "silent")
    n.start()
    agent = poll_until("the agent on trial", lambda: n.lines() and int(n.lines()[0][4]), 30)
    inbox = _inbox_of(agent)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"READY=1\nX_MYOLO_COMMIT=1", b"\0" + inbox[1:].encode())
    poll_until("the node back on 4.0.0", lambda: n.store.current() == "4.0.0", 60)
    state = n.state()
    assert state is not None and state.failed is not None and state.failed.version == "4.0.9"
    n.stop()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _inbox_of(pid: int) -> str:
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return next(e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"NOTIFY_SOCKET="))


def test_under_systemd_it_relays_ready_and_pets_the_watchdog_at_half_its_timeout(node, tmp_path: Path) -> None:
    """systemd's side, played by a socket: READY and STATUS come through; the watchdog is petted by the
    launcher itself, every half timeout, not once per pet (or line) of the agent, which pets every 0.1 s."""
    n = node()
    _release(n.store, "4.0.0", "good")
    n.store.switch("4.0.0")
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(0.2)
    n.start(NOTIFY_SOCKET=str(path), WATCHDOG_USEC="2000000")
    got: list[str] = []
    began = time.monotonic()
    poll_until("the agent's READY relayed", lambda: _read(sock, got) or any("READY=1" in m for m in got), 30)
    ready_at = time.monotonic()
    while time.monotonic() - ready_at < 4:
        _read(sock, got)
    seconds = time.monotonic() - began
    assert n.stop() == 0
    sock.close()
    assert any("STATUS=fake agent" in m for m in got)
    pets = sum(m.count("WATCHDOG=1") for m in got)
    assert 1 <= pets <= seconds / 1.0 + 1, (pets, seconds)  # at most one a second (half of 2 s), plus the first


def _read(sock: socket.socket, into: list[str]) -> None:
    with contextlib.suppress(TimeoutError):
        into.append(sock.recv(4096).decode())
