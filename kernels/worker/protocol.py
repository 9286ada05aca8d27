"""The wire format between a worker and its agent over ZeroMQ.

Worker -> agent (the agent binds PULL on ``MYOLO_ZMQ_PROGRESS``, every worker connects PUSH): two-frame
messages ``[topic, json]`` with topic ``b"progress"`` (an ``events.payloads.TrainingProgress``) or
``b"heartbeat"`` (a ``WorkerHeartbeat``). Agent -> worker (the agent binds PUSH on ``MYOLO_ZMQ_CONTROL``, rank
0 connects PULL): one frame, a JSON ``ControlMessage``. PUSH/PULL rather than PUB/SUB because PUB drops what
is sent before a subscriber has joined, and a lost "stop" is not acceptable.

The agent must decode these without importing ``kernels``: ``WorkerHeartbeat`` and ``ControlMessage`` are
plain msgspec Structs that can move to ``events/payloads/training.py`` unchanged (the field names are the
contract).
"""

from __future__ import annotations

from typing import Literal

import msgspec

PROGRESS_TOPIC = b"progress"
HEARTBEAT_TOPIC = b"heartbeat"

ControlKind = Literal["checkpoint", "stop"]


class WorkerHeartbeat(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Sent by every rank (so the agent can tell which rank hung or died); ``step`` is the last finished
    optimizer step (-1 before the first), ``sent_at`` wall-clock seconds."""

    job_id: str
    generation: int
    rank: int
    world_size: int
    step: int
    pid: int
    sent_at: float


class ControlMessage(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A request from the agent. ``job_id``/``generation`` fence it: a worker of another generation (left
    over from before a resize) ignores it instead of stopping or saving the wrong run."""

    kind: ControlKind
    job_id: str
    generation: int


heartbeat_encoder = msgspec.json.Encoder()
control_decoder = msgspec.json.Decoder(ControlMessage)
