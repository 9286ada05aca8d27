"""A worker lets its agent profile it: under Yama's ptrace_scope 1 (Ubuntu's default) only an ancestor may
attach, and py-spy, the agent's child, is the worker's sibling. ``PR_SET_PTRACER`` names the agent as the
worker's tracer, which lets the agent and its children (py-spy) attach; nobody else gains anything. Without
Yama, or with scope 0, nothing changes; scopes 2 and 3 still refuse, and the profile says how to allow it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Mapping

from myolo.kernels.worker.orphan import agent_pid

_PR_SET_PTRACER = 0x59616D61


def let_agent_trace(env: Mapping[str, str] | None = None) -> bool:
    """Name the agent (``MYOLO_AGENT_PID``) as this process's tracer; True when the kernel took it."""
    pid = agent_pid(os.environ if env is None else env)
    if pid is None or not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PTRACER, pid, 0, 0, 0) == 0
    return False
