"""A worker never outlives the agent that started it.

Why: a worker whose agent died (``kill -9``, an OOM kill) can no longer be stopped, watched or reaped by
anyone, and the coordinator restarts its job on a new generation anyway; left alone it holds its GPU, its
memory and a share of the CPU for as long as its collectives let it run. The agent puts its pid in
``MYOLO_AGENT_PID``; the worker (or warm standby) asks the kernel for SIGKILL when its parent dies
(``PR_SET_PDEATHSIG``), and leaves at once if the parent is already gone (it died before the request).
Started without the variable (``myolo-train``, torchrun) nothing changes. The agent's own sweep of the
processes a previous run left (``myolo.agent.trainer.leftovers``) covers what this cannot.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Mapping

AGENT_PID_VAR = "MYOLO_AGENT_PID"
EXIT_ORPHANED = 3
_PR_SET_PDEATHSIG = 1


def agent_pid(env: Mapping[str, str]) -> int | None:
    """The agent's pid from ``env``; None when unset or not a positive integer (then nothing is asked)."""
    raw = env.get(AGENT_PID_VAR, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 1 else None


def die_with_agent(env: Mapping[str, str] | None = None) -> None:
    """Ask for SIGKILL when the parent dies; exit ``EXIT_ORPHANED`` now if it is not the agent any more."""
    pid = agent_pid(os.environ if env is None else env)
    if pid is None or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != pid:
        print(
            f"myolo-train worker (pid {os.getpid()}): its agent (pid {pid}) is gone; leaving",
            file=sys.stderr,
            flush=True,
        )
        os._exit(EXIT_ORPHANED)
