"""sd_notify against a real AF_UNIX datagram socket set as NOTIFY_SOCKET (path and abstract '@')."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

from myolo.agent.notify import Notifier


@pytest.fixture
def listener(tmp_path):
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    yield str(path), sock
    sock.close()


def recv(sock) -> dict[str, str]:
    data = sock.recv(4096).decode()
    return dict(line.split("=", 1) for line in data.split("\n"))


def test_ready_watchdog_status_stopping_reach_the_socket(listener):
    path, sock = listener
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "20000000", "WATCHDOG_PID": str(os.getpid())}
    n = Notifier.from_env(env)
    assert n.enabled and n.watchdog_interval_s == 10.0
    assert n.ready("publishing 8 GPUs")
    assert recv(sock) == {"READY": "1", "STATUS": "publishing 8 GPUs"}
    assert n.watchdog()
    assert recv(sock) == {"WATCHDOG": "1"}
    assert n.status("kafka away\nspooling")  # a newline would split the field: it is flattened
    assert recv(sock) == {"STATUS": "kafka away spooling"}
    assert n.stopping()
    assert recv(sock) == {"STOPPING": "1"}
    assert n.sent == 4
    n.close()


def test_abstract_namespace_socket():
    name = f"myolo-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.settimeout(5)
    try:
        n = Notifier.from_env({"NOTIFY_SOCKET": "@" + name})
        assert n.ready()
        assert recv(sock) == {"READY": "1"}
    finally:
        sock.close()


def test_variables_are_removed_so_children_do_not_speak_for_the_agent(listener):
    path, _ = listener
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000", "OTHER": "x"}
    Notifier.from_env(env)
    assert env == {"OTHER": "x"}


def test_watchdog_meant_for_another_pid_or_invalid_is_ignored(listener):
    path, _ = listener
    assert (
        Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}).watchdog_usec
        is None
    )
    assert Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "soon"}).watchdog_usec is None
    assert Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "0"}).watchdog_interval_s is None


def test_without_systemd_every_call_is_a_no_op():
    n = Notifier.from_env({})
    assert not n.enabled
    assert n.ready() is False and n.watchdog() is False and n.sent == 0


def test_a_vanished_socket_is_counted_not_raised(tmp_path):
    n = Notifier(str(tmp_path / "gone.sock"))
    assert n.ready() is False
    assert n.errors == 1
