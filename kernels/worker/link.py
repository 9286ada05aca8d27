"""``AgentLink``: the worker's side of the ZeroMQ link to its node agent.

Nothing here may slow training down or kill it: sends are non-blocking (when the agent stops reading and
the queue is full, records are dropped and counted, never waited on), a malformed or foreign control
message is logged and ignored, and with no endpoints set (standalone ``myolo-train``) every method is a
cheap no-op. ``progress`` sends whatever it is given, so the caller picks the reporting ranks (one per
data-parallel replica, for per-replica staleness); ``heartbeat`` should be called on every rank, so the
agent can tell which rank hung or died.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import msgspec
import structlog
import zmq

from myolo.events.payloads import TrainingProgress
from myolo.kernels.worker.control import CHECKPOINT_BIT, STOP_BIT, ControlRequest, agree
from myolo.kernels.worker.env import WorkerEnv
from myolo.kernels.worker.protocol import (
    HEARTBEAT_TOPIC,
    PROGRESS_TOPIC,
    WorkerHeartbeat,
    control_decoder,
    heartbeat_encoder,
)

log = structlog.get_logger("myolo.kernels.worker")

_BITS = {"checkpoint": CHECKPOINT_BIT, "stop": STOP_BIT}


class AgentLink:
    """PUSH progress and heartbeats to ``env.progress_endpoint``; PULL control messages (rank 0) from
    ``env.control_endpoint``. ``poll_control`` is collective when a control endpoint is set (all ranks
    must see the same environment, which the agent guarantees)."""

    def __init__(
        self,
        env: WorkerEnv,
        *,
        send_progress: bool = True,
        heartbeat_interval_s: float = 1.0,
        send_hwm: int = 1000,
        linger_ms: int = 1000,
        context: zmq.Context | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.env = env
        self.send_progress = send_progress
        self.heartbeat_interval_s = heartbeat_interval_s
        self._monotonic = monotonic
        self._wall = wall_clock
        self._last_heartbeat: float | None = None
        self.dropped = 0
        self.ignored_control: list[str] = []
        self._ctx = context
        self._own_ctx = False
        self._push: zmq.Socket | None = None
        self._pull: zmq.Socket | None = None
        if env.standalone:
            return
        if self._ctx is None:
            self._ctx, self._own_ctx = zmq.Context(), True
        if env.progress_endpoint:
            self._push = self._ctx.socket(zmq.PUSH)
            self._push.setsockopt(zmq.SNDHWM, send_hwm)
            self._push.setsockopt(zmq.LINGER, linger_ms)
            self._push.connect(env.progress_endpoint)
        if env.control_endpoint and env.rank == 0:
            self._pull = self._ctx.socket(zmq.PULL)
            self._pull.setsockopt(zmq.LINGER, 0)
            self._pull.connect(env.control_endpoint)

    # ------------------------------------------------------------ outgoing
    def _send(self, topic: bytes, body: bytes) -> bool:
        if self._push is None:
            return False
        try:
            self._push.send_multipart([topic, body], flags=zmq.NOBLOCK)
            return True
        except zmq.Again:
            self.dropped += 1
            return False

    def progress(self, record: TrainingProgress) -> bool:
        """Push one progress record (unless built with ``send_progress=False``); True when queued."""
        if not self.send_progress:
            return False
        return self._send(PROGRESS_TOPIC, msgspec.json.encode(record))

    def heartbeat(self, step: int, force: bool = False) -> bool:
        """Push a heartbeat, at most once per ``heartbeat_interval_s`` unless forced; True when sent."""
        if self._push is None:
            return False
        now = self._monotonic()
        due = self._last_heartbeat is None or now - self._last_heartbeat >= self.heartbeat_interval_s
        if not (force or due):
            return False
        self._last_heartbeat = now
        beat = WorkerHeartbeat(
            job_id=self.env.job_id,
            generation=self.env.generation,
            rank=self.env.rank,
            world_size=self.env.world_size,
            step=step,
            pid=os.getpid(),
            sent_at=self._wall(),
        )
        return self._send(HEARTBEAT_TOPIC, heartbeat_encoder.encode(beat))

    # ------------------------------------------------------------ incoming
    def _drain(self, timeout_ms: int) -> int:
        """Rank 0: read every pending control message (waiting up to ``timeout_ms`` for the first one);
        returns their union as a mask."""
        mask = 0
        if self._pull is None:
            return mask
        if timeout_ms > 0:
            self._pull.poll(timeout_ms)
        while True:
            try:
                raw = self._pull.recv(flags=zmq.NOBLOCK)
            except zmq.Again:
                return mask
            try:
                msg = control_decoder.decode(raw)
            except msgspec.ValidationError as exc:
                self._ignore(f"malformed control message {raw[:200]!r}: {exc}")
                continue
            except msgspec.DecodeError as exc:
                self._ignore(f"control message is not JSON {raw[:200]!r}: {exc}")
                continue
            if msg.job_id != self.env.job_id or msg.generation != self.env.generation:
                self._ignore(
                    f"control {msg.kind!r} for job {msg.job_id} generation {msg.generation} ignored: this "
                    f"worker is job {self.env.job_id} generation {self.env.generation}"
                )
                continue
            mask |= _BITS[msg.kind]

    def _ignore(self, why: str) -> None:
        self.ignored_control.append(why)
        log.warning("control message ignored", reason=why)

    def poll_control(self, timeout_ms: int = 0) -> ControlRequest | None:
        """The control request to act on after this step, the same on every rank; None when there is none.
        Collective (one tiny broadcast) when a control endpoint is set; free otherwise. The loop uses the
        default ``timeout_ms=0`` (never wait); a positive value lets rank 0 wait for a request."""
        if self.env.control_endpoint is None:
            return None
        return ControlRequest.from_mask(agree(self._drain(timeout_ms)))

    def close(self) -> None:
        """Close the sockets; queued records get up to ``linger_ms`` to reach the agent."""
        for sock in (self._push, self._pull):
            if sock is not None:
                sock.close()
        self._push = self._pull = None
        if self._own_ctx and self._ctx is not None:
            self._ctx.term()
            self._ctx = None

    def __enter__(self) -> AgentLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
