"""Helpers shared by the tests: waiting on I/O, reading a topic, writing as an external producer, key files."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from myolo.common.keys import Ed25519Signer, ensure_ed25519
from myolo.events.codec import encode_structured
from myolo.events.envelope import new_event
from myolo.events.payloads import Payload
from myolo.events.settings import KafkaSettings

DROP = object()  # in ``structured(...)``: remove the field
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


async def wait_until(
    cond: Callable[[], Any], timeout: float = 60.0, what: str = "condition", *, every: float = 0.05
) -> None:
    """Poll for something the broker or another process will do (I/O), with a deadline. ``cond`` may be a
    coroutine function (reading a topic); ``every`` spaces out polls that cost the broker a consumer each."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not ((await r) if inspect.isawaitable(r := cond()) else r):
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(every)


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for as long as the block runs: bound (so no other process
    can take it meanwhile) but never listening. A port picked free and released could be anyone's by the
    time the test connects."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick): for a process to bind in a moment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def read_topic(settings: KafkaSettings, topic: str) -> list[ConsumerRecord]:
    """Every record of ``topic`` from the beginning to its current end, partition by partition."""
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False)
    await consumer.start()
    out: list[ConsumerRecord] = []
    try:
        consumer.subscribe([topic])  # asks the client for the topic's metadata, so every partition is known
        await wait_until(lambda: consumer.partitions_for_topic(topic), timeout=30, what=f"metadata of {topic}")
        consumer.unsubscribe()
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        end = await consumer.end_offsets(parts)
        while [tp for tp in parts if await consumer.position(tp) < end[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                out += records
    finally:
        await consumer.stop()
    return out


def kcat(bootstrap: str, topic: str, key: str, value: bytes, headers: dict[str, str] | None = None) -> None:
    """Write one record with kcat (librdkafka): an external producer that is not ours."""
    assert KCAT is not None, "kcat is not installed: `make sysdeps` (or apt-get install kcat) installs it"
    cmd = [KCAT, "-P", "-b", bootstrap, "-t", topic, "-k", key, "-D", "\x1e"]
    for k, v in (headers or {}).items():
        cmd += ["-H", f"{k}={v}"]
    subprocess.run(cmd, input=value, check=True, timeout=30)


def structured(payload: Payload, source: str = "ext/kcat", **changes: Any) -> bytes:
    """A structured-mode CloudEvent as an external producer writes it, with ``a__b__0__c`` paths changed
    (``DROP`` removes the field)."""
    doc = msgspec.json.decode(encode_structured(new_event(payload, source)))
    for path, value in changes.items():
        target = doc
        *parents, last = path.split("__")
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        if value is DROP:
            del target[last]
        else:
            target[last] = value
    return msgspec.json.encode(doc)


def pid_gone(pid: int) -> bool:
    """True when no process has ``pid`` any more (reaped, not merely a zombie of ours waiting to be)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def pids_mentioning(text: str) -> list[int]:
    """Live processes (not zombies, not this one) whose command line or working directory contains ``text``:
    a test's strays. The directory too: a warm standby handed a job keeps its own command line
    (``myolo.kernels.cli.warm``) but works in the job's directory."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                status = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                cwd = ""
            if (text in cmdline or text in cwd) and status != "Z" and int(entry.name) != os.getpid():
                pids.append(int(entry.name))
    return pids


def write_key(path: Path, text: str | None = None) -> Path:
    """A secret key file as a key must be kept (mode 0600, or the loaders refuse it); by default a fresh
    32-byte HMAC secret in hex."""
    path.write_text(os.urandom(32).hex() if text is None else text)
    path.chmod(0o600)
    return path


def new_ed25519_key(path: Path) -> Ed25519Signer:
    """A fresh Ed25519 private key at ``path`` (0600) with its public half at ``path.pub``."""
    path.unlink(missing_ok=True)
    return ensure_ed25519(path)


def poll_until(
    what: str, check: Callable[[], Any], timeout: float, every: Callable[[], None] | None = None, pause: float = 0.5
) -> Any:
    """``check()``'s first truthy value, polled every ``pause`` s (calling ``every`` between polls) until
    ``timeout``: for tests of real processes, whose conditions come true on their own clocks."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        if every is not None:
            every()
        time.sleep(pause)
