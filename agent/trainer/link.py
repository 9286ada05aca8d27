"""The agent's side of the ZeroMQ link to its workers (the wire format: ``kernels.worker.protocol``).

One PULL socket receives every worker's progress and heartbeats (``[topic, json]``); each running job gets a
PUSH socket of its own for control messages, to which only that job's global rank 0 connects (a shared PUSH
would deal messages round-robin across jobs). Both bind on loopback to a port the kernel picks. Frames are
capped in size and decoded into typed Structs: anything else is counted and dropped, never raised.
"""

from __future__ import annotations

import msgspec
import zmq
import zmq.asyncio

from events.payloads import ControlMessage, TrainingProgress, WorkerHeartbeat
from events.payloads.training import ZMQ_HEARTBEAT_TOPIC as HEARTBEAT_TOPIC
from events.payloads.training import ZMQ_PROGRESS_TOPIC as PROGRESS_TOPIC

MAX_MESSAGE_BYTES = 256 * 1024
HOST = "127.0.0.1"

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
    def __init__(self, context: zmq.asyncio.Context | None = None) -> None:
        self._own = context is None
        self.ctx = context or zmq.asyncio.Context()
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self.pull.setsockopt(zmq.LINGER, 0)
        port = self.pull.bind_to_random_port(f"tcp://{HOST}")
        self.progress_endpoint = f"tcp://{HOST}:{port}"

    async def receive(self) -> list[bytes]:
        return await self.pull.recv_multipart()

    def control_socket(self) -> tuple[zmq.asyncio.Socket, str]:
        """A PUSH socket for one job's control messages, and the endpoint its rank 0 connects to."""
        sock = self.ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 16)
        port = sock.bind_to_random_port(f"tcp://{HOST}")
        return sock, f"tcp://{HOST}:{port}"

    def close(self) -> None:
        self.pull.close()
        if self._own:
            self.ctx.term()


async def send_control(sock: zmq.asyncio.Socket, message: ControlMessage) -> bool:
    """Queue a control message for the job's rank 0 (kept until it connects); False when the queue is full."""
    try:
        await sock.send(_control.encode(message), flags=zmq.NOBLOCK)
        return True
    except zmq.Again:
        return False
