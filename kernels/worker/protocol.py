"""The wire format between a worker and its agent over ZeroMQ.

Worker -> agent (the agent binds PULL on ``MYOLO_ZMQ_PROGRESS``, every worker connects PUSH): two-frame
messages ``[topic, json]`` with topic ``b"progress"`` (an ``myolo.events.payloads.TrainingProgress``) or
``b"heartbeat"`` (a ``WorkerHeartbeat``). Agent -> worker (the agent binds PUSH on ``MYOLO_ZMQ_CONTROL``, rank
0 connects PULL): one frame, a JSON ``ControlMessage``. PUSH/PULL rather than PUB/SUB because PUB drops what
is sent before a subscriber has joined, and a lost "stop" is not acceptable.

``WorkerHeartbeat`` and ``ControlMessage`` live in ``myolo.events.payloads.training`` so the agent decodes them
without importing ``kernels`` (or torch).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from myolo.events.payloads.training import ZMQ_HEARTBEAT_TOPIC as HEARTBEAT_TOPIC
from myolo.events.payloads.training import ZMQ_PROGRESS_TOPIC as PROGRESS_TOPIC
from myolo.events.payloads.training import ControlMessage, WorkerHeartbeat

ControlKind = Literal["checkpoint", "stop"]

heartbeat_encoder = msgspec.json.Encoder()
control_decoder = msgspec.json.Decoder(ControlMessage)

__all__ = [
    "HEARTBEAT_TOPIC",
    "PROGRESS_TOPIC",
    "ControlKind",
    "ControlMessage",
    "WorkerHeartbeat",
    "control_decoder",
    "heartbeat_encoder",
]
