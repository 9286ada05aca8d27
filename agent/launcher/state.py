"""The launcher's record of the agent's releases on trial: ``<releases>/agent/trial.json``, one writer.

The release ``current`` names is on trial while it differs from the one last committed. Each start of it
counts a try; a start beyond ``max_tries`` restores the committed release instead and records the failed one
(what the agent's samples then report). The first start with no record trusts what runs: there is nothing
older to go back to.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from msgspec.structs import replace

from myolo.common.files import atomic_write
from myolo.events.payloads.node import FailedRelease, ReleaseComponent

TRIAL_FILE = "trial.json"
COMMIT_FIELD = "X_MYOLO_COMMIT"  # the agent's notification that its release works (systemd ignores X_ fields)
REPORT_ENV = "MYOLO_RELEASES_REPORT_ROLLBACK"  # set for the first start after a restore: publish its fault
MAX_RECORD_BYTES = 64 * 1024


class TrialState(msgspec.Struct, frozen=True, kw_only=True):
    """``committed``: the release last known good (None: the base install). ``trial``: the release on trial
    and ``tries`` its starts so far; ``last_reason``: why its last start failed, ``last_error``: the tail of
    that start's output. ``failed``: the newest release taken back, kept until a later release commits."""

    committed: str | None
    trial: str | None = None
    tries: int = 0
    last_reason: str = ""
    last_error: str = ""
    failed: FailedRelease | None = None

    @property
    def on_trial(self) -> bool:
        return self.trial is not None


class Start(msgspec.Struct, frozen=True, kw_only=True):
    """What the next start runs: ``restore`` set means switch ``current`` back to it first (the trial failed)."""

    state: TrialState
    restore: bool = False


def next_start(
    state: TrialState | None, current: str | None, max_tries: int, now: float, component: ReleaseComponent = "agent"
) -> Start:
    """The state to write before starting ``component`` from ``current``, and whether to restore first."""
    if state is None or current == state.committed:
        return Start(state=TrialState(committed=current, failed=state.failed if state else None))
    if state.trial != current:
        state = replace(state, trial=current, tries=0, last_reason="", last_error="")
    if state.tries < max_tries:
        return Start(state=replace(state, tries=state.tries + 1))
    failed = FailedRelease(
        component=component,
        version=current or "base",
        restored=state.committed,
        tries=state.tries,
        reason=state.last_reason[:500],
        error=state.last_error[-4000:],
        at=now,
    )
    return Start(state=TrialState(committed=state.committed, failed=failed), restore=True)


def committed(state: TrialState, version: str | None) -> TrialState:
    """``version`` proved itself: it is the release to come back to from now on."""
    if state.trial != version:
        return state
    return TrialState(committed=version)


def failed_start(state: TrialState, reason: str, output: str = "") -> TrialState:
    """A start of the release on trial ended without its commit: ``reason`` says how, ``output`` is its tail."""
    return replace(state, last_reason=reason[:500], last_error=output[-4000:]) if state.on_trial else state


def load(path: Path) -> TrialState | None:
    """The record, or None when there is none. A damaged record counts as none (the launcher then trusts
    what runs) rather than stopping the node from starting."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_RECORD_BYTES:
        return None
    try:
        return msgspec.json.decode(raw, type=TrialState)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def save(path: Path, state: TrialState) -> None:
    """Durable and whole (``atomic_write``): a start never reads half a record."""
    atomic_write(path, msgspec.json.encode(state))
