"""How the agent comes back as the version an upgrade or rollback switched to, after it stopped cleanly.

``exit``: the process ends with :data:`EXIT_RESTART` (75) and systemd starts the unit again
(``RestartForceExitStatus=75``), whose ``PYTHONPATH`` starts with ``<dir>/agent/current``. ``exec``: no
supervisor (the local stack): the process replaces itself with ``python -P -m myolo.agent <its arguments>``, the same
pid, that link first on its PYTHONPATH (``-P``: not the working directory, which may be a source checkout).
Either way the daemon has stopped as on SIGTERM first: workers stopped, the spool flushed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog

from myolo.agent.releases.env import PYTHONPATH, python_path

log = structlog.get_logger("myolo.agent.releases")
EXIT_RESTART = 75  # EX_TEMPFAIL: "come back", distinct from a crash (1) and a failed start (2)
Mode = Literal["exec", "exit"]


def restart_mode(configured: str, environ: Mapping[str, str]) -> Mode:
    """``auto``: ``exit`` under systemd (it sets INVOCATION_ID for each start of a unit), else ``exec``."""
    if configured == "auto":
        return "exit" if environ.get("INVOCATION_ID") else "exec"
    return "exit" if configured == "exit" else "exec"


@dataclass(frozen=True)
class RestartPlan:
    """A restart the daemon owes once it has stopped: into ``version`` from ``release`` (the current link)."""

    mode: Mode
    release: str
    version: str
    reason: str

    def argv(self, argv: Sequence[str]) -> list[str]:
        return [sys.executable, "-P", "-m", "myolo.agent", *argv[1:]]

    def env(self, environ: Mapping[str, str]) -> dict[str, str]:
        env = dict(environ)
        env[PYTHONPATH] = python_path(environ.get(PYTHONPATH), self.release)
        return env

    def run(
        self,
        *,
        argv: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        execve: Callable[[str, list[str], dict[str, str]], object] = os.execve,
    ) -> int:
        """Exec (returns only if that fails, or with a test's ``execve``) or return the exit code."""
        if self.mode == "exit":
            log.warning("restarting: exiting for systemd to start the new version", code=EXIT_RESTART, **self._log())
            return EXIT_RESTART
        args = self.argv(sys.argv if argv is None else argv)
        log.warning("restarting: re-executing the agent", argv=args, **self._log())
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            execve(sys.executable, args, self.env(os.environ if environ is None else environ))
        except OSError as exc:
            log.error("restart failed: cannot re-execute the agent", error=str(exc), argv=args)
        return EXIT_RESTART

    def _log(self) -> dict[str, str]:
        return {"version": self.version, "release": self.release, "reason": self.reason}
