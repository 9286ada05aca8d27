"""Bridge from the training loop's ``Control`` hooks to the agent's ZeroMQ link (``myolo.kernels.worker``).

Standalone runs (no endpoints in the environment) get inert hooks, so the loop never branches on it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from myolo.events.payloads import TrainingProgress
from myolo.kernels.train.loop import Control


def agent_control(env: Any) -> Control:
    if env.standalone:
        return Control()
    from myolo.kernels.worker import AgentLink

    link = AgentLink(env)

    def poll() -> tuple[bool, bool]:
        req = link.poll_control()  # collective: the same answer on every rank
        return (False, False) if req is None else (req.checkpoint, req.stop)

    def progress(payload: TrainingProgress) -> None:
        # The agent's view of the run: its job id and generation, whatever the job file said.
        link.progress(
            msgspec.structs.replace(payload, job_id=env.job_id, generation=env.generation, world_size=env.world_size)
        )

    return Control(poll=poll, progress=progress, heartbeat=link.heartbeat, close=link.close)
