"""The launcher's loop: start the agent from its current release, watch it, and decide what comes next.

The agent runs as the launcher's child, with the launcher's notification socket (``inbox.py``). Its READY,
STATUS and STOPPING lines go on to systemd; its WATCHDOG pets are checked here (no pet for the watchdog's
timeout: the agent is killed); its commit (``X_MYOLO_COMMIT=1``) ends a release's trial. The launcher pets
systemd's watchdog itself while its loop turns, and asks systemd for more start-up time while the agent has
not yet been READY, so a trial that takes several starts is not cut short by ``TimeoutStartSec=``.

After the agent ends: exit 75 (an upgrade or rollback switched ``current``) starts it again at once; exit 0
ends the launcher with 0; anything else (a crash, a kill for a missed watchdog or commit) starts it again
after a pause that doubles while it keeps failing. A release on trial is started at most ``max_tries``
times (``state.next_start``); then the committed release is restored and started instead.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from myolo.agent.launcher import state as trial
from myolo.agent.launcher.inbox import Inbox
from myolo.agent.notify import Notifier
from myolo.agent.releases.config import ReleasesConfig
from myolo.agent.releases.env import PYTHONPATH, python_path
from myolo.agent.releases.restart import EXIT_RESTART
from myolo.agent.releases.store import ReleaseStore

log = structlog.get_logger("myolo.agent.launcher")
KILL_GRACE_S = 5.0  # from SIGTERM to SIGKILL for an agent killed for a missed watchdog or commit
MAX_DELAY_S = 60.0
STEADY_S = 60.0  # an agent that ran this long without failing resets the pause between starts
TAIL_BYTES = 4000
_PR_SET_PDEATHSIG = 1


@dataclass
class Run:
    """One start of the agent and what the launcher has seen of it."""

    proc: subprocess.Popen
    version: str | None
    on_trial: bool
    started: float
    last_pet: float
    killed_for: str | None = None
    tail: deque[bytes] = field(default_factory=lambda: deque(maxlen=64))

    def output(self) -> str:
        return b"".join(self.tail).decode("utf-8", errors="replace")[-TAIL_BYTES:]


def agent_argv(args: Sequence[str]) -> list[str]:
    """The agent daemon, imported from whatever PYTHONPATH's first entry (the current link) holds."""
    return [sys.executable, "-P", "-m", "myolo.agent", "run", *args]


class Launcher:
    """Supervise one agent on this node; ``run()`` returns the launcher's exit code."""

    def __init__(
        self,
        cfg: ReleasesConfig,
        args: Sequence[str],
        *,
        environ: Mapping[str, str] | None = None,
        argv: Callable[[Sequence[str]], list[str]] = agent_argv,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        self.args = list(args)
        env = dict(os.environ if environ is None else environ)
        self.upstream = Notifier.from_env(env, unset=True)
        self.environ = env
        self.argv = argv
        self.monotonic = monotonic
        self.wall = wall
        self.store = ReleaseStore(Path(cfg.dir), "agent")
        self.trial_path = self.store.dir / trial.TRIAL_FILE
        usec = self.upstream.watchdog_usec
        self.watchdog_s = usec / 1e6 if usec else cfg.watchdog_s
        self.inbox = Inbox()
        self.stopping: int | None = None  # the signal that asked the launcher to stop
        self.ready_sent = False
        self.failures = 0
        self._petted = float("-inf")  # when systemd's watchdog was last petted

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        old = signal.set_wakeup_fd(wake_w)
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            while True:
                code = self._one_run(wake_r)
                if code is not None:
                    return code
        finally:
            for s, h in handlers.items():
                signal.signal(s, h)
            signal.set_wakeup_fd(old)
            os.close(wake_r)
            os.close(wake_w)
            self.inbox.close()
            self.upstream.close()

    def _one_run(self, wake_r: int) -> int | None:
        """Start the agent once and follow it to its end. Returns the launcher's exit code, or None to go on."""
        run = self._start()
        self._follow(run, wake_r)
        code = run.proc.wait()
        self.inbox.expect(None)
        if self.stopping is not None:
            log.info("stopped", agent_exit=code)
            return 0 if code in (0, EXIT_RESTART, -signal.SIGTERM) else _launcher_code(code)
        if code == 0 and run.killed_for is None:
            log.info("the agent ended by itself; the launcher ends too")
            return 0
        ran = self.monotonic() - run.started
        if code == EXIT_RESTART and run.killed_for is None:
            log.info("the agent restarts into the release now current", ran_s=round(ran, 1))
            self.failures = 0
            return None
        why = run.killed_for or _describe(code)
        if run.on_trial:
            state = trial.load(self.trial_path)
            if state is not None:
                trial.save(self.trial_path, trial.failed_start(state, why, run.output()))
        self.failures = 1 if ran >= STEADY_S else self.failures + 1
        delay = self.cfg.restart_delay_s if run.on_trial else self._backoff()
        log.error(
            "the agent failed",
            reason=why,
            version=run.version or "base",
            on_trial=run.on_trial,
            ran_s=round(ran, 1),
            restart_in_s=round(delay, 1),
            output=run.output()[-800:],
        )
        self._pause(delay, wake_r)
        return 0 if self.stopping is not None else None

    def _backoff(self) -> float:
        return min(MAX_DELAY_S, self.cfg.restart_delay_s * 2 ** max(0, self.failures - 1))

    # ------------------------------------------------------------------ one start
    def _start(self) -> Run:
        current = self.store.current()
        start = trial.next_start(trial.load(self.trial_path), current, self.cfg.max_tries, self.wall())
        state = start.state
        if start.restore:
            switched = self.store.restore(state.committed)
            failed = state.failed
            log.error(
                "the release on trial never committed: restored the committed release",
                version=current,
                restored=switched.version or "base",
                tries=failed.tries if failed else None,
                error=failed.error[-800:] if failed else None,
            )
        trial.save(self.trial_path, state)  # the try is counted before it runs
        version = self.store.current()
        env = dict(self.environ)
        env[PYTHONPATH] = python_path(self.environ.get(PYTHONPATH), self.store.current_path)
        env["NOTIFY_SOCKET"] = self.inbox.name
        env["WATCHDOG_USEC"] = str(int(self.watchdog_s * 1e6))
        env["MYOLO_RELEASES_RESTART"] = "exit"
        if start.restore:
            env[trial.REPORT_ENV] = "1"
        if not self.ready_sent:
            self._extend_start()
        proc = subprocess.Popen(
            self.argv(self.args),
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        self.inbox.expect(proc.pid)
        now = self.monotonic()
        log.info(
            "agent started",
            pid=proc.pid,
            version=version or "base",
            on_trial=state.on_trial,
            tries=f"{state.tries}/{self.cfg.max_tries}" if state.on_trial else None,
        )
        return Run(proc=proc, version=version, on_trial=state.on_trial, started=now, last_pet=now)

    def _follow(self, run: Run, wake_r: int) -> None:
        """Until the agent's output closes and it has exited: relay, check the watchdog and the commit."""
        assert run.proc.stderr is not None
        out = run.proc.stderr.fileno()
        os.set_blocking(out, False)
        sel = selectors.DefaultSelector()
        sel.register(out, selectors.EVENT_READ, "out")
        sel.register(self.inbox.fileno(), selectors.EVENT_READ, "inbox")
        sel.register(wake_r, selectors.EVENT_READ, "wake")
        open_out = True
        try:
            while open_out or run.proc.poll() is None:
                for key, _ in sel.select(timeout=self._tick_s()):
                    if key.data == "out" and not self._copy(run, out):
                        sel.unregister(out)
                        open_out = False
                    elif key.data == "inbox":
                        self._notified(run)
                    elif key.data == "wake":
                        _drain(wake_r)
                        self._signalled(run)
                self._check(run)
                if not open_out and run.proc.poll() is None:
                    time.sleep(0.05)  # output closed early (the agent closed its stderr): poll for its exit
        finally:
            sel.close()
            run.proc.stderr.close()

    def _copy(self, run: Run, fd: int) -> bool:
        """The agent's stderr through to the launcher's (the log), its tail kept. False at its end."""
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        run.tail.append(chunk)
        with contextlib.suppress(OSError):
            os.write(sys.stderr.fileno(), chunk)
        return True

    def _notified(self, run: Run) -> None:
        for fields in self.inbox.receive():
            run.last_pet = self.monotonic()
            if fields.get(trial.COMMIT_FIELD) == "1" and run.on_trial:
                self._commit(run)
            upstream = {k: v for k, v in fields.items() if k in ("READY", "STATUS", "STOPPING")}
            if fields.get("READY") == "1":
                self.ready_sent = True
            if upstream:
                self.upstream.notify(**upstream)

    def _commit(self, run: Run) -> None:
        state = trial.load(self.trial_path)
        if state is None or state.trial != run.version:
            return
        trial.save(self.trial_path, trial.committed(state, run.version))
        run.on_trial = False
        self.failures = 0
        log.info("the release committed itself", version=run.version or "base", tries=state.tries)

    def _signalled(self, run: Run) -> None:
        if self.stopping is not None and run.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                run.proc.send_signal(signal.SIGTERM)
            self.upstream.stopping("stopping the agent")

    def _check(self, run: Run) -> None:
        """The watchdog and the commit deadline; pet systemd's watchdog while this loop turns."""
        now = self.monotonic()
        self._pet()
        if run.proc.poll() is not None:
            return
        if run.killed_for is not None:
            if now - run.last_pet > KILL_GRACE_S:
                with contextlib.suppress(ProcessLookupError):
                    run.proc.kill()
            return
        if self.stopping is not None:
            return
        if now - run.last_pet > self.watchdog_s:
            self._kill(run, f"watchdog: no sign of life from the agent for {self.watchdog_s:.0f} s")
        elif run.on_trial and now - run.started > self.cfg.commit_timeout_s:
            self._kill(run, f"the release did not commit itself within {self.cfg.commit_timeout_s:.0f} s")

    def _kill(self, run: Run, why: str) -> None:
        log.error("killing the agent", reason=why, pid=run.proc.pid, version=run.version or "base")
        run.killed_for = why
        run.last_pet = self.monotonic()  # the grace before SIGKILL counts from here
        with contextlib.suppress(ProcessLookupError):
            run.proc.send_signal(signal.SIGTERM)

    def _pet(self) -> None:
        """systemd's watchdog, at half its timeout (the loop turns on every line the agent writes)."""
        every = self.upstream.watchdog_interval_s
        if every is not None and self.monotonic() - self._petted >= every:
            self.upstream.watchdog()
            self._petted = self.monotonic()

    def _tick_s(self) -> float:
        return max(0.05, min(1.0, self.watchdog_s / 4))

    def _pause(self, delay: float, wake_r: int) -> None:
        """Wait ``delay`` before the next start, ended early by a stop; pet systemd meanwhile."""
        until = self.monotonic() + delay
        sel = selectors.DefaultSelector()
        sel.register(wake_r, selectors.EVENT_READ)
        try:
            while self.stopping is None and (left := until - self.monotonic()) > 0:
                if sel.select(timeout=min(left, self._tick_s())):
                    _drain(wake_r)
                self._pet()
        finally:
            sel.close()

    def _extend_start(self) -> None:
        """Ask systemd (``EXTEND_TIMEOUT_USEC``) for the time this start may take to become READY."""
        budget = self.cfg.commit_timeout_s + KILL_GRACE_S + self._backoff() + 30
        self.upstream.notify(EXTEND_TIMEOUT_USEC=int(budget * 1e6))

    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGHUP:
            self._forward(signal.SIGHUP)
            return
        self.stopping = signum

    def _forward(self, signum: int) -> None:
        pid = self.inbox.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _launcher_code(code: int) -> int:
    return 128 - code if code < 0 else code


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 512):
            pass


def _die_with_parent() -> None:
    """The agent never outlives its launcher (a second launcher would start a second agent)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
