"""The ``upgrade`` and ``rollback`` actions of the running agent (``myolo.agent.releases`` does the disk work).

Both share one lock (an install and a switch never interleave) and are refused while a restart is pending.
``agent``: once the command's ``done`` ack is in the spool, the daemon stops as on SIGTERM (workers stopped,
the spool flushed, the ack with it) and ``myolo-agent run`` then restarts into the new version
(``RestartPlan``: exit 75 for systemd, or exec). ``trainer``: install, switch, and a job check on a probe
job that ends its trial (``trainer_trial.py``; a release that cannot answer is taken back and the upgrade
fails): workers started from then on import ``<dir>/trainer/current`` (``myolo.agent.releases.env.trainer_env``); running ones keep their code,
and the warm standbys, which imported the old one, are replaced.

Admission (the command is *rejected*, nothing ran): a reserved or mismatched version, a non-wheel artifact, a
local file that is not there, a version installed from another hash, a rollback to a version not installed.
A SHA-256 mismatch is known only after the download: the command *fails* with both hashes, nothing installed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import structlog

import myolo
from myolo.agent.commands.args import ArgsError
from myolo.agent.commands.executor import ActionFn, AdmitFn
from myolo.agent.daemon.runtime import Runtime
from myolo.agent.daemon.trainer import trainer_python, worker_env
from myolo.agent.daemon.trainer_trial import TakenBack, TrainerTrial
from myolo.agent.releases import ReleaseError, ReleaseStore, RestartPlan
from myolo.agent.releases.base import interpreter_version
from myolo.agent.releases.fetch import check_local
from myolo.agent.releases.install import Fetch, check_upgrade, fetch_artifact, install_release
from myolo.agent.releases.restart import restart_mode
from myolo.agent.releases.store import Switched
from myolo.agent.trainer.check import TrainerBroken, check_job
from myolo.events.payloads import TrainerJob
from myolo.events.payloads.commands import RollbackArgs, RollbackResult, UpgradeArgs, UpgradeResult

log = structlog.get_logger("myolo.agent.daemon")


class NodeReleases:
    """The node's releases as the daemon's actions see them, bound to one runtime."""

    def __init__(self, rt: Runtime, *, fetch: Fetch = fetch_artifact) -> None:
        self.rt = rt
        self._fetch = fetch
        self._lock = asyncio.Lock()
        self._pending: RestartPlan | None = None  # a restart waiting for its command's ack
        self._waiting: asyncio.Task | None = None  # the task that waits
        self.trainer_trial = TrainerTrial(rt, on_restore=self._renew_standbys)
        self._warn_if_not_current()

    def store(self, component: str) -> ReleaseStore:
        return ReleaseStore(Path(self.rt.cfg.releases.dir), component)

    def actions(self) -> dict[str, ActionFn]:
        return {"upgrade": self.upgrade, "rollback": self.rollback}

    def admissions(self) -> dict[str, AdmitFn]:
        return {"upgrade": self.admit_upgrade, "rollback": self.admit_rollback}

    # ------------------------------------------------------------------ admission
    async def admit_upgrade(self, args: UpgradeArgs) -> None:
        self._refuse_while_restarting()
        try:
            check_upgrade(self.store(args.component), args.version, args.artifact, args.sha256)
            check_local(args.artifact)
        except ReleaseError as exc:
            raise ArgsError(exc.reason, exc.field or "args.artifact") from None

    async def admit_rollback(self, args: RollbackArgs) -> None:
        self._refuse_while_restarting()
        try:
            self.store(args.component).check_rollback(args.version)
        except ReleaseError as exc:
            raise ArgsError(exc.reason, exc.field or "args.version") from None

    def _refuse_while_restarting(self) -> None:
        plan = self._pending or self.rt.restart
        if plan is not None:
            raise ArgsError(
                f"the agent is restarting ({plan.reason}); send the command again once it is back", "action"
            )

    # ------------------------------------------------------------------ actions
    async def upgrade(self, args: UpgradeArgs) -> UpgradeResult:
        self._refuse_while_restarting()
        store, cfg = self.store(args.component), self.rt.cfg.releases
        async with self._lock:
            installed = await install_release(
                store,
                version=args.version,
                artifact=args.artifact,
                sha256=args.sha256,
                python=self._python(args.component),
                cfg=cfg,
                now=self.rt.clock.now(),
                fetch=self._fetch,
            )
            base = await self._base_version(args.component) if store.current() is None else None
            if args.component == "trainer":
                self.trainer_trial.before_switch()
            switched = store.switch(args.version, base=base)
            pruned = store.prune(cfg.keep)
        restart = self._after_switch(store, switched, args.restart, f"upgrade to {args.version}", args.rollout)
        if args.component == "trainer" and self.trainer_trial.on_trial:
            await self._probe_trainer()
        return UpgradeResult(
            component=args.component,
            version=args.version,
            previous=switched.previous,
            path=installed.path,
            sha256=args.sha256,
            installed=installed.fresh,
            pruned=pruned,
            restart=restart,
        )

    async def rollback(self, args: RollbackArgs) -> RollbackResult:
        self._refuse_while_restarting()
        store = self.store(args.component)
        async with self._lock:
            switched = store.rollback(args.version)
        restart = self._after_switch(store, switched, args.restart, f"rollback to {args.version}", args.rollout)
        return RollbackResult(
            component=args.component,
            version=args.version,
            previous=switched.previous,
            path=str(store.path(args.version)) if switched.version is not None else None,
            restart=restart,
        )

    # ------------------------------------------------------------------ after a switch
    def _after_switch(
        self, store: ReleaseStore, switched: Switched, restart: bool, reason: str, rollout: str | None
    ) -> str | None:
        """The trainer's standbys are renewed; the agent restarts (after the ack) when asked. Returns how."""
        log.warning("release switched", component=store.component, reason=reason, rollout=rollout)
        if store.component == "trainer":
            self.trainer_trial.after_switch()
            self._renew_standbys()
            return None
        if not restart or not switched.changed:  # nothing switched (already there): nothing to restart into
            return None
        mode = restart_mode(self.rt.cfg.releases.restart, os.environ)
        version = switched.version or (store.base() or "base")
        self._stop_after_ack(RestartPlan(mode=mode, release=str(store.current_path), version=version, reason=reason))
        return mode

    def _stop_after_ack(self, plan: RestartPlan) -> None:
        """The action runs in the executor's task for this command, which ends once the ``done`` ack is in
        the spool: the stop waits for that, so the ack is flushed with the spool and never lost. The plan is
        the runtime's only then: an agent stopped meanwhile (SIGTERM) just stops, and starts the new version
        whenever it is started again."""
        self._pending = plan
        command = asyncio.current_task()

        async def stop() -> None:
            try:
                if command is not None:
                    await asyncio.wait([command])
                    if command.cancelled():
                        return
                log.warning("stopping to restart into the new version", reason=plan.reason)
                self.rt.restart = plan
                self.rt.stop_event.set()
            finally:
                self._pending = None

        self._waiting = asyncio.get_running_loop().create_task(stop(), name="release-restart")

    async def _probe_trainer(self) -> None:
        """The trainer's job check on a probe job (the default one, one worker), to end its trial now."""
        cfg = self.rt.cfg.trainer
        workers = Path(cfg.workers_dir)
        workers.mkdir(parents=True, exist_ok=True)
        check = check_job(
            trainer_python(self.rt), TrainerJob(), 1, cfg.check_timeout_s, env=worker_env(self.rt), cwd=workers
        )
        try:
            await self.trainer_trial.judge(check, "fix the release and upgrade again")
        except (TakenBack, TrainerBroken) as exc:
            raise ReleaseError(exc.reason) from None
        except ArgsError:
            return  # the trainer answered (it refused the probe): it runs, which is all its trial asks

    def _renew_standbys(self) -> None:
        sup = self.rt.trainer
        if sup is None:
            return
        sup.warm.configure(  # a new epoch: standbys that imported the old trainer are retired, new ones follow
            python=sup.python,
            workers_dir=sup.workers_dir,
            nice=sup.cfg.warm_nice,
            term_grace_s=sup.cfg.term_grace_s,
            ready_timeout_s=sup.cfg.startup_timeout_s,
        )

    # ------------------------------------------------------------------ what runs now
    def _python(self, component: str) -> tuple[str, ...]:
        """pip runs in the interpreter that will import the release (its tags decide what installs)."""
        return (sys.executable,) if component == "agent" else trainer_python(self.rt)

    def _running_from_release(self) -> bool:
        return Path(myolo.__file__).resolve().is_relative_to(self.store("agent").dir.resolve())

    async def _base_version(self, component: str) -> str | None:
        """The version the component runs without a release: the agent's own while it runs its base install;
        the trainer's, what its interpreter imports with the workers' environment."""
        if component == "trainer":
            return await interpreter_version(trainer_python(self.rt), worker_env(self.rt))
        return None if self._running_from_release() else self.rt.version

    def _warn_if_not_current(self) -> None:
        """A current release that is not what runs: the unit's PYTHONPATH does not start with its link."""
        current = self.store("agent").current()
        if current is not None and not self._running_from_release():
            log.warning(
                "the agent's current release is not the code running",
                current=current,
                running=self.rt.version,
                imported_from=str(Path(myolo.__file__).parent),
                fix=f"put {self.store('agent').current_path} first on PYTHONPATH (see the systemd unit)",
            )
