"""How the agent comes back after switching itself: exit 75 for systemd, or exec with the release first."""

from __future__ import annotations

import sys

from myolo.agent.releases import EXIT_RESTART, RestartPlan
from myolo.agent.releases.env import trainer_env
from myolo.agent.releases.restart import restart_mode

RELEASE = "/r/agent/current"


def plan(mode: str) -> RestartPlan:
    return RestartPlan(mode=mode, release=RELEASE, version="4.0.1", reason="upgrade to 4.0.1")  # type: ignore[arg-type]


def test_auto_exits_under_systemd_and_execs_elsewhere() -> None:
    assert restart_mode("auto", {"INVOCATION_ID": "f00"}) == "exit"
    assert restart_mode("auto", {}) == "exec"
    assert restart_mode("exec", {"INVOCATION_ID": "f00"}) == "exec"
    assert restart_mode("exit", {}) == "exit"


def test_exit_mode_returns_the_restart_code_and_execs_nothing() -> None:
    calls: list[object] = []
    assert plan("exit").run(execve=lambda *a: calls.append(a)) == EXIT_RESTART == 75
    assert calls == []


def test_exec_mode_re_runs_the_same_command_line_with_the_release_first_on_the_path() -> None:
    calls: list[tuple[str, list[str], dict[str, str]]] = []
    env = {"PYTHONPATH": f"/src:{RELEASE}", "MYOLO_NODE_ID": "n1"}
    argv = ["/venv/bin/myolo-agent", "run", "--config", "/etc/a.toml", "--log-json"]
    plan("exec").run(argv=argv, environ=env, execve=lambda *a: calls.append(a))
    [(exe, args, new_env)] = calls
    assert exe == sys.executable
    assert args == [sys.executable, "-P", "-m", "myolo.agent", "run", "--config", "/etc/a.toml", "--log-json"]
    assert new_env == {"PYTHONPATH": f"{RELEASE}:/src", "MYOLO_NODE_ID": "n1"}  # first, once


def test_a_failed_exec_still_ends_the_process_with_the_restart_code() -> None:
    def broken(*args):
        raise FileNotFoundError("no interpreter")

    assert plan("exec").run(argv=["agent"], environ={}, execve=broken) == EXIT_RESTART


def test_workers_get_the_trainer_release_first_and_never_the_agents() -> None:
    env = trainer_env({"PYTHONPATH": "/r/agent/current:/src", "HOME": "/h"}, "/r")
    assert env == {"PYTHONPATH": "/r/trainer/current:/src", "HOME": "/h"}
    assert trainer_env({}, "/r")["PYTHONPATH"] == "/r/trainer/current"
