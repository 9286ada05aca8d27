"""The agent's side of the ZeroMQ link to its workers (the wire format: ``myolo.kernels.worker.protocol``).

One PULL socket receives every worker's progress and heartbeats (``[topic, json]``); each running job gets a
PUSH socket of its own for control messages, to which only that job's global rank 0 connects (a shared PUSH
would deal messages round-robin across jobs). They are Unix-domain (``ipc://``) sockets in the agent's
runtime directory, so only processes that may enter that directory can talk to the agent (loopback TCP lets
any local user in) and libzmq's I/O thread does less work; when the directory's path is too long for a
socket name, loopback TCP on a port the kernel picks. Frames are capped in size and decoded into typed
Structs: anything else is counted and dropped, never raised.

Why plain sockets read from the event loop's reader callback rather than ``zmq.asyncio``: a future per
message makes each message cost far more CPU than decoding it (figures in ``tests/benchmarks/supervisor.md``).
Here one reader callback drains whatever is queued, then the socket is left alone for ``BATCH_S``, so messages
are read in batches at most 10 times a second.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable
from pathlib import Path

import msgspec
import zmq

from myolo.events.payloads import ControlMessage, TrainingProgress, WorkerHeartbeat
from myolo.events.payloads.training import ZMQ_HEARTBEAT_TOPIC as HEARTBEAT_TOPIC
from myolo.events.payloads.training import ZMQ_PROGRESS_TOPIC as PROGRESS_TOPIC

MAX_MESSAGE_BYTES = 256 * 1024
MAX_PER_CALLBACK = 1000  # then the loop gets a turn; the rest is read on the next one
BATCH_S = 0.1  # after a read, the socket is left alone this long (I/O pacing, not a behaviour timer)
HOST = "127.0.0.1"
MAX_IPC_PATH = 107  # sun_path holds 108 bytes including the terminating NUL

_progress = msgspec.json.Decoder(TrainingProgress)
_heartbeat = msgspec.json.Decoder(WorkerHeartbeat)
_control = msgspec.json.Encoder()


class BadMessage(ValueError):
    """A frame from a worker that is not a progress record or a heartbeat."""


def decode(frames: list[bytes]) -> TrainingProgress | WorkerHeartbeat:
    if len(frames) != 2:
        raise BadMessage(f"expected 2 frames [topic, json], got {len(frames)}")
    topic, body = frames
    try:
        if topic == PROGRESS_TOPIC:
            return _progress.decode(body)
        if topic == HEARTBEAT_TOPIC:
            return _heartbeat.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadMessage(f"{topic[:32]!r} message: {exc}") from None
    raise BadMessage(f"unknown topic {topic[:32]!r}")


class WorkerLink:
    def __init__(self, socket_dir: Path | None = None, context: zmq.Context | None = None) -> None:
        self._own = context is None
        self.ctx = context or zmq.Context()
        self._dir = socket_dir
        self._names = itertools.count()
        self._files: dict[zmq.Socket, Path] = {}
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self.pull.setsockopt(zmq.LINGER, 0)
        self.progress_endpoint = self._bind(self.pull, "workers")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handler: Callable[[list[bytes]], None] | None = None
        self._paused: asyncio.TimerHandle | None = None

    def attach(self, handler: Callable[[list[bytes]], None]) -> None:
        """Call ``handler`` with every message from now on, from the running loop."""
        self._loop, self._handler = asyncio.get_running_loop(), handler
        self._loop.add_reader(self.pull.getsockopt(zmq.FD), self._readable)
        self._loop.call_soon(self._readable)  # the FD is edge-triggered: read what came before attaching

    def detach(self) -> None:
        if self._paused is not None:
            self._paused.cancel()
            self._paused = None
        if self._loop is not None:
            self._loop.remove_reader(self.pull.getsockopt(zmq.FD))
            self._loop = self._handler = None

    def _readable(self) -> None:
        loop, handler = self._loop, self._handler
        if handler is None or loop is None or self._paused is not None:
            return
        if self._read_batch(handler):
            loop.call_soon(self._readable)  # more may be queued; no new edge will announce it
            return
        # Pause: what arrives in the next BATCH_S is read in one go. A wake-up costs the same libzmq
        # mailbox handling whether it reads one message or fifty (tests/benchmarks/supervisor.md).
        loop.remove_reader(self.pull.getsockopt(zmq.FD))
        self._paused = loop.call_later(BATCH_S, self._resume)

    def drain(self) -> None:
        """Read what is queued now, paused or not (a worker just exited: hear its last words first)."""
        if self._handler is not None:
            self._read_batch(self._handler)

    def _read_batch(self, handler: Callable[[list[bytes]], None]) -> bool:
        """Up to MAX_PER_CALLBACK queued messages to ``handler``; True when more may be waiting."""
        pull = self.pull
        for _ in range(MAX_PER_CALLBACK):
            if not pull.getsockopt(zmq.EVENTS) & zmq.POLLIN:  # cheaper than a recv that raises Again
                return False
            handler(pull.recv_multipart(zmq.NOBLOCK))
        return True

    def _resume(self) -> None:
        self._paused = None
        if self._loop is not None and self._handler is not None:
            self._loop.add_reader(self.pull.getsockopt(zmq.FD), self._readable)
            self._readable()

    def _bind(self, sock: zmq.Socket, name: str) -> str:
        path = self._dir / f"zmq-{name}.sock" if self._dir is not None else None
        if path is not None and len(os.fsencode(str(path))) <= MAX_IPC_PATH:
            path.unlink(missing_ok=True)  # left by an agent that did not stop cleanly
            sock.bind(f"ipc://{path}")
            self._files[sock] = path
            return f"ipc://{path}"
        return f"tcp://{HOST}:{sock.bind_to_random_port(f'tcp://{HOST}')}"

    def control_socket(self) -> tuple[zmq.Socket, str]:
        """A PUSH socket for one job's control messages, and the endpoint its rank 0 connects to."""
        sock = self.ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 16)
        return sock, self._bind(sock, f"control-{next(self._names)}")

    def close_control(self, sock: zmq.Socket) -> None:
        sock.close(linger=0)
        self._unlink(sock)

    def _unlink(self, sock: zmq.Socket) -> None:
        path = self._files.pop(sock, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        self.detach()
        self.pull.close()
        self._unlink(self.pull)
        if self._own:
            self.ctx.term()


def send_control(sock: zmq.Socket, message: ControlMessage) -> bool:
    """Queue a control message for the job's rank 0; False when it cannot be queued (no peer yet, or full)."""
    try:
        sock.send(_control.encode(message), flags=zmq.NOBLOCK)
        return True
    except zmq.Again:
        return False
