"""The local stack's state file: which of our processes run, where, and how to find their logs.

`myoloctl local up|down|status` run as separate processes, so everything one needs to find what another
started lives in `<state dir>/stack.json`. The file lists processes generically (name, role, pid, ports,
log) so coordinators and agents started by `local up --nodes N` join the same list as the broker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from myolo.common.files import atomic_write
from myolo.coordinator.localstack.broker.errors import BrokerError
from myolo.coordinator.localstack.broker.security import StackSecurity, UserRecord
from myolo.events.stackfile import STATE_FILE, default_state_dir

_FORMAT = 1


@dataclass
class ProcessRecord:
    """One process of the stack. `marker` must occur in its command line for the pid to count as ours."""

    name: str
    role: str
    pid: int
    marker: str
    log: str
    ports: dict[str, int] = field(default_factory=dict)
    started_at: float = 0.0
    info: dict[str, str] = field(default_factory=dict)


@dataclass
class StackState:
    bootstrap: str | None = None
    processes: list[ProcessRecord] = field(default_factory=list)
    security: StackSecurity | None = None  # None: the broker lets anyone in (PLAINTEXT)

    def find(self, name: str) -> ProcessRecord | None:
        return next((p for p in self.processes if p.name == name), None)

    def put(self, record: ProcessRecord) -> None:
        self.processes = [p for p in self.processes if p.name != record.name] + [record]

    def drop(self, name: str) -> None:
        self.processes = [p for p in self.processes if p.name != name]


def load(state_dir: Path) -> StackState:
    path = state_dir / STATE_FILE
    try:
        raw = json.loads(path.read_text())
        procs = [ProcessRecord(**p) for p in raw.get("processes", [])]
        return StackState(bootstrap=raw.get("bootstrap"), processes=procs, security=_security(raw.get("security")))
    except FileNotFoundError:
        return StackState()
    except (ValueError, TypeError, AttributeError) as exc:
        raise BrokerError(
            f"state file {path} is not readable: {exc}",
            hint=f"stop any myolo processes by hand, then delete {path}",
        ) from exc


def save(state_dir: Path, state: StackState) -> None:
    """Atomic replace, so a reader never sees half a file."""
    state_dir.mkdir(parents=True, exist_ok=True)
    body = {"format": _FORMAT, "bootstrap": state.bootstrap}
    body["processes"] = [dataclasses.asdict(p) for p in state.processes]
    if state.security is not None:
        body["security"] = dataclasses.asdict(state.security)
    atomic_write(state_dir / STATE_FILE, (json.dumps(body, indent=2) + "\n").encode(), durable=False)


def _security(raw: dict | None) -> StackSecurity | None:
    if raw is None:
        return None
    users = {name: UserRecord(**user) for name, user in raw.pop("users", {}).items()}
    return StackSecurity(**raw, users=users)


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """Serialise up/down/status across processes (two `up` at once must not start two brokers)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def local_security(state_dir: Path | None = None) -> StackSecurity | None:
    """How the local stack's broker is secured (None when it is not, or when there is no stack)."""
    try:
        return load(state_dir or default_state_dir()).security
    except (OSError, BrokerError, ValueError):
        return None
