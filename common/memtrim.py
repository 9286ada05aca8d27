"""Hand glibc's free pages back to the kernel every few minutes (``malloc_trim``), in the long-lived daemons.

A daemon that allocates and frees in bursts (a fault's reaction, a generation's start, a broker's return)
leaves free chunks inside glibc's heaps. glibc gives back only the free top of a heap by itself, so resident
memory ratchets up to the bursts' high-water marks although nothing leaks, and a slow leak hides among the
steps. ``malloc_trim(0)`` releases every free page of every arena (madvise), a few milliseconds for a heap
of this size, from a daemon thread so the event loop never waits on it. ``MYOLO_MALLOC_TRIM_S`` sets the
interval (300 s; 0 turns it off, e.g. to measure without it). Not glibc: nothing to do.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable

from myolo.common.errors import ConfigError

ENV_EVERY = "MYOLO_MALLOC_TRIM_S"
DEFAULT_EVERY_S = 300.0


def _libc_trim() -> Callable[[], bool] | None:
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: bool(fn(0))


def every_from_env(env: dict[str, str] | os._Environ[str] = os.environ) -> float:
    """The interval in seconds (0: off); ``ConfigError`` naming the variable when it is not a number >= 0."""
    raw = env.get(ENV_EVERY, "")
    if not raw:
        return DEFAULT_EVERY_S
    try:
        every = float(raw)
    except ValueError:
        every = -1.0
    if not 0 <= every <= 86_400:
        raise ConfigError(ENV_EVERY, f"must be seconds in [0, 86400] (0: off), got {raw!r}")
    return every


def start(
    name: str, every_s: float | None = None, trim: Callable[[], bool] | None = None
) -> tuple[threading.Thread, threading.Event] | None:
    """Trim every ``every_s`` (the environment's, by default) from a daemon thread; None when it is off or the
    C library has no ``malloc_trim``. Setting the returned event stops the thread."""
    every = every_from_env() if every_s is None else every_s
    trim = trim or _libc_trim()
    if every <= 0 or trim is None:
        return None
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every):
            trim()

    thread = threading.Thread(target=run, name=f"{name}-malloc-trim", daemon=True)
    thread.start()
    return thread, stop
