"""A trainer release is on trial until a job check runs on it; one that cannot even answer is taken back.

The agent is the one writer of ``<releases>/trainer/trial.json`` (the same record as the launcher's for the
agent, ``myolo.agent.launcher.state``). An upgrade of the trainer starts the trial and at once runs the trainer's job
check on a probe job in the workers' environment, so the trial ends within seconds whether or not a job comes
(a rollout's wave must not pass on a node no job has tried); a trial still open (the agent stopped during
that check) ends at the next ``start_workers``, which runs the same check. An answer (the job accepted or
refused) commits the release; a check that cannot run (the release does not import, the interpreter dies or
hangs) fails it at once: ``current`` goes back to the committed release, the samples carry the failure, a
``release`` fault says so, and the upgrade (or that ``start_workers``) fails. One try is enough: a release
that cannot import never will.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog

from myolo.agent.commands.args import ArgsError
from myolo.agent.daemon.loops import publish_fault
from myolo.agent.daemon.runtime import Runtime
from myolo.agent.daemon.trial import release_fault
from myolo.agent.launcher import state as trial
from myolo.agent.releases.store import ReleaseStore
from myolo.agent.trainer.check import TrainerBroken
from myolo.events.payloads import FailedRelease

log = structlog.get_logger("myolo.agent.daemon")
TRIES = 1


class TakenBack(ArgsError):
    """A job check could not run on the trainer release on trial, so it was taken back."""


class TrainerTrial:
    """``on_restore``: what else a switch back needs (the warm standbys imported the release: renewed)."""

    def __init__(self, rt: Runtime, on_restore: Callable[[], None] = lambda: None) -> None:
        self.rt = rt
        self.on_restore = on_restore
        self.store = ReleaseStore(Path(rt.cfg.releases.dir), "trainer")
        self.path = self.store.dir / trial.TRIAL_FILE
        state = trial.load(self.path)
        if state is not None and state.failed is not None:
            rt.failed_releases["trainer"] = state.failed

    def before_switch(self) -> None:
        """Record what runs now as the release to come back to, unless a record says so already."""
        if trial.load(self.path) is None:
            trial.save(self.path, trial.TrialState(committed=self.store.current()))

    def after_switch(self) -> None:
        """``current`` names a new release: its trial begins (or, switched back to the committed one, ends)."""
        state = trial.next_start(trial.load(self.path), self.store.current(), TRIES, self.rt.clock.now(), "trainer")
        trial.save(self.path, state.state)

    @property
    def on_trial(self) -> bool:
        state = trial.load(self.path)
        return state is not None and state.on_trial

    async def judge(self, check: Awaitable[None], then: str) -> None:
        """Await a job check of the trainer as it is now; it settles an open trial. A check that cannot run
        takes the release on trial back and raises :class:`TakenBack` saying so, ending with ``then`` (what
        the sender should do next); the check's own verdict (a refused job) is raised as it is."""
        try:
            await check
        except TrainerBroken as exc:
            failed = self.broken(exc.reason)
            if failed is None:
                raise
            raise TakenBack(
                f"{exc.reason}; the trainer release {failed.version} on trial is taken back "
                f"(now {failed.restored or 'the base install'}): {then}",
                exc.field,
            ) from None
        except ArgsError:
            self.answered()
            raise
        self.answered()

    def answered(self) -> None:
        """The trainer answered a job check: the release works."""
        state = trial.load(self.path)
        if state is None or not state.on_trial:
            return
        trial.save(self.path, trial.committed(state, self.store.current()))
        self.rt.failed_releases.pop("trainer", None)
        log.info("trainer release committed", version=self.store.current())

    def broken(self, error: str) -> FailedRelease | None:
        """The trainer could not answer: take the release back. Returns the failure, or None off trial."""
        state = trial.load(self.path)
        if state is None or not state.on_trial:
            return None
        state = trial.failed_start(state, "its job check could not run", error)
        start = trial.next_start(state, self.store.current(), TRIES, self.rt.clock.now(), "trainer")
        failed = start.state.failed
        if not start.restore or failed is None:
            return None
        self.store.restore(start.state.committed)
        trial.save(self.path, start.state)
        self.on_restore()
        self.rt.failed_releases["trainer"] = failed
        publish_fault(self.rt, release_fault(self.rt.cfg.node_id, failed))
        log.error("trainer release taken back: its job check could not run", version=failed.version, error=error)
        return failed
