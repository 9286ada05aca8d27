"""The agent's side of a release trial: commit itself once it works, and report a release it came back from.

Commit: READY sent, a sample acknowledged by Kafka and the command consumer holding its partition (commands
can reach the node again), then ``X_MYOLO_COMMIT=1`` on the notification socket. The launcher takes it when
the release is on trial and ignores it otherwise; systemd ignores ``X_`` fields. Report: the launcher's record
names the agent release it restored; every sample carries it, and the first start after the restore (the
launcher says so in ``MYOLO_RELEASES_REPORT_ROLLBACK``) publishes one fault saying so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import structlog

from myolo.agent.daemon.loops import publish_fault
from myolo.agent.daemon.runtime import Runtime
from myolo.agent.launcher import state as trial
from myolo.events.payloads import FailedRelease, NodeFault

log = structlog.get_logger("myolo.agent.daemon")


async def commit_release(rt: Runtime, joined: Callable[[], bool] | None, poll_s: float = 0.5) -> None:
    """Say the running release works, once it does (``joined``: None when commands are off)."""
    await rt.ready.wait()
    await rt.publisher.wait_first_sample()
    while joined is not None and not joined():
        await rt.clock.sleep(poll_s)
    rt.notifier.notify(**{trial.COMMIT_FIELD: 1})
    if rt.on_trial is not None:
        log.info("release committed", version=rt.version)
    rt.on_trial = None


def load_trial(rt: Runtime, environ: Mapping[str, str] | None = None) -> None:
    """From the launcher's record, into the samples: whether this release runs on trial, and the agent
    release the launcher restored; that one's fault is published once, on the start the launcher says."""
    state = trial.load(Path(rt.cfg.releases.dir) / "agent" / trial.TRIAL_FILE)
    if state is None:
        return
    if state.on_trial:
        rt.on_trial = state.trial
    if state.failed is None:
        return
    rt.failed_releases["agent"] = state.failed
    if (os.environ if environ is None else environ).get(trial.REPORT_ENV) == "1":
        publish_fault(rt, release_fault(rt.cfg.node_id, state.failed))


def release_fault(node_id: str, failed: FailedRelease) -> NodeFault:
    """``release``: a warning, not a failure: the node runs the release it came back to."""
    restored = failed.restored or "the base install"
    return NodeFault(
        node_id=node_id,
        kind="release",
        health="warn",
        reasons=[
            f"{failed.component} {failed.version} never committed itself in {failed.tries} start(s)"
            + (f" (the last: {failed.reason})" if failed.reason else "")
            + f"; switched back to {restored}"
        ],
        message=failed.error[-2000:] or None,
    )
