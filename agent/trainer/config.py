"""The ``[trainer]`` section of ``agent.toml``: how the agent runs and watches the node's training workers.

Every timeout is a setting, and the hang bound is learned: a worker is hung when it is silent for longer than
``max(hang_floor_s, hang_factor x the job's recent step time)``; before its first step it has
``startup_timeout_s`` (importing torch, building the model and meeting the other ranks take a while).

Warm standby workers (``myolo.agent.trainer.warm``): ``warm_workers`` processes that have already imported torch and
the trainer wait for a job, so a new generation's workers skip most of their start-up; unset means one per
GPU of the node, 0 turns them off. Replacements are started once every worker of a starting job has trained
a step (or ``warm_refill_after_s`` after the start), their imports niced by ``warm_nice``.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

Seconds = Annotated[float, msgspec.Meta(gt=0, le=86_400)]


class TrainerConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True
    # argv of the interpreter that has torch and the trainer; default: the agent's own (a dev checkout).
    # On a node the agent's venv has no torch: point this at the trainer's venv, e.g. ["/opt/myolo-train/bin/python"]
    python: list[str] = []
    workers_dir: str = ""  # default: <data_dir>/workers (per-rank logs, NCCL logs, job files)
    # progress events: at most one per job per interval (the latest step always goes out)
    progress_interval_s: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 1.0
    hang_floor_s: Seconds = 60.0
    hang_factor: Annotated[float, msgspec.Meta(ge=1, le=1000)] = 5.0
    hang_window_steps: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 32
    startup_timeout_s: Seconds = 600.0
    # stop: how long the workers get to checkpoint and leave on their own, then SIGTERM -> SIGKILL
    stop_timeout_s: Seconds = 120.0
    term_grace_s: Seconds = 10.0
    check_timeout_s: Seconds = 60.0  # the trainer's own check of a job before any worker starts
    log_tail_lines: Annotated[int, msgspec.Meta(ge=0, le=50)] = 20
    warm_workers: Annotated[int, msgspec.Meta(ge=0, le=64)] | None = None  # None: one per GPU; 0: off
    warm_nice: Annotated[int, msgspec.Meta(ge=0, le=19)] = 10
    warm_refill_after_s: Seconds = 30.0
