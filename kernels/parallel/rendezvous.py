"""A rendezvous store hosted by the process that starts the workers, on a port the kernel picks.

Why: picking a "free" port, closing it and handing the number to rank 0 leaves a window in which another
process (any outgoing connection) can take it, and the run then fails at start. Binding port 0 and keeping
the socket open has no such window. Workers join it the way torchrun's workers join their agent's store:
``TORCHELASTIC_USE_AGENT_STORE=True`` makes every rank a client of the store at MASTER_ADDR:MASTER_PORT.
"""

from __future__ import annotations

from datetime import timedelta

from torch.distributed import TCPStore

HOST = "127.0.0.1"


def host_store(timeout_s: float = 300.0) -> TCPStore:
    """A store listening on a kernel-picked loopback port; keep it alive until the workers have exited."""
    return TCPStore(HOST, 0, None, True, timedelta(seconds=timeout_s), wait_for_workers=False)


def worker_env(store: TCPStore) -> dict[str, str]:
    """The rendezvous variables that point a worker (any rank) at ``store``."""
    return {"MASTER_ADDR": HOST, "MASTER_PORT": str(store.port), "TORCHELASTIC_USE_AGENT_STORE": "True"}
