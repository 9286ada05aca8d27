"""The worker's environment: torchrun-style rendezvous variables plus the job identity and agent endpoints.

Why a parser of its own: the agent (and ``myolo-train``) start workers exactly as torchrun would, and a
worker started with a typo in its environment must fail at once with the variable's name and what to set,
not later in a rendezvous timeout.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


class WorkerEnvError(ValueError):
    """A required variable is missing or malformed; the message names it and says what to set."""


def _required(env: Mapping[str, str], name: str, what: str) -> str:
    value = env.get(name)
    if value is None or value.strip() == "":
        raise WorkerEnvError(f"{name} is not set: set {name} to {what} (torchrun-style worker environment)")
    return value.strip()


def _int(name: str, raw: str, what: str, lo: int, hi: int | None = None) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise WorkerEnvError(f"{name}={raw!r} is not an integer: set {name} to {what}") from None
    if value < lo or (hi is not None and value > hi):
        bound = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise WorkerEnvError(f"{name}={value} is out of range: it must be {bound} ({what})")
    return value


def _endpoint(env: Mapping[str, str], name: str) -> str | None:
    value = (env.get(name) or "").strip()
    if not value:
        return None
    if "://" not in value or value.split("://", 1)[0] not in ("tcp", "ipc", "inproc"):
        raise WorkerEnvError(
            f"{name}={value!r} is not a ZeroMQ endpoint: use tcp://host:port or ipc:///path, or unset it "
            "to run without an agent"
        )
    return value


@dataclass(frozen=True)
class WorkerEnv:
    """Who this worker is and where it reports. Endpoints are None when run standalone (no agent)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    job_id: str = "local"
    generation: int = 0
    progress_endpoint: str | None = None
    control_endpoint: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> WorkerEnv:
        """Parse ``os.environ`` (or ``environ``). Required: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
        MASTER_PORT. Optional: LOCAL_WORLD_SIZE (default WORLD_SIZE), MYOLO_JOB_ID (default "local"),
        MYOLO_GENERATION (default 0), MYOLO_ZMQ_PROGRESS and MYOLO_ZMQ_CONTROL (agent endpoints)."""
        env = os.environ if environ is None else environ
        world = _int("WORLD_SIZE", _required(env, "WORLD_SIZE", "the number of workers"), "the number of workers", 1)
        rank = _int("RANK", _required(env, "RANK", "this worker's global rank"), f"0..{world - 1}", 0, world - 1)
        local_world_raw = (env.get("LOCAL_WORLD_SIZE") or "").strip() or str(world)
        local_world = _int("LOCAL_WORLD_SIZE", local_world_raw, f"workers on this node, 1..{world}", 1, world)
        local_rank = _int(
            "LOCAL_RANK",
            _required(env, "LOCAL_RANK", "this worker's rank on its node"),
            f"this worker's rank on its node, 0..{local_world - 1}",
            0,
            local_world - 1,
        )
        addr = _required(env, "MASTER_ADDR", "the rendezvous host (rank 0's address)")
        port = _int("MASTER_PORT", _required(env, "MASTER_PORT", "the rendezvous TCP port"), "a TCP port", 1, 65535)
        job_id = (env.get("MYOLO_JOB_ID") or "").strip() or "local"
        gen_raw = (env.get("MYOLO_GENERATION") or "").strip() or "0"
        generation = _int("MYOLO_GENERATION", gen_raw, "the job generation, an integer >= 0", 0)
        return cls(
            rank=rank,
            world_size=world,
            local_rank=local_rank,
            local_world_size=local_world,
            master_addr=addr,
            master_port=port,
            job_id=job_id,
            generation=generation,
            progress_endpoint=_endpoint(env, "MYOLO_ZMQ_PROGRESS"),
            control_endpoint=_endpoint(env, "MYOLO_ZMQ_CONTROL"),
        )

    @property
    def standalone(self) -> bool:
        """True when no agent is listening (both endpoints unset)."""
        return self.progress_endpoint is None and self.control_endpoint is None
