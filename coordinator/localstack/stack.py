"""Start, stop and list the stack's coordinators and agents: real detached processes, one folder each.

Every process is recorded in ``<state dir>/stack.json`` (under the state lock) the moment it is launched,
with its config path as the marker that must appear in ``/proc/<pid>/cmdline``; so ``down`` from another
shell finds it, and a recycled pid is never signalled. Each binds port 0 and logs the URL it got; the port is
read back from the log and recorded as soon as it is there. Stopping goes agents first, then coordinators, so
no agent publishes into a stack whose coordinators are gone, and the broker (stopped by the caller) last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from myolo.common.files import atomic_write
from myolo.coordinator.cli.auth import stack_token
from myolo.coordinator.core.errors import Refusal
from myolo.coordinator.localstack import configs, health, identity, prometheus, security
from myolo.coordinator.localstack.broker import process, state
from myolo.coordinator.localstack.broker.errors import BrokerError

COORDINATOR, AGENT = "coordinator", "agent"
# What each role logs once it listens, with the URL it got (event, the record's port and info keys)
LISTENING = {
    COORDINATOR: ("HTTP API listening", "api", "api_url"),
    AGENT: ("health endpoint listening", "health", "health_url"),
}
LAUNCH_HEADER = b"\n=== "  # starts the line written to a process's log before each launch
STOP_ORDER = (AGENT, COORDINATOR)
REPO_ROOT = Path(__file__).resolve().parents[2]


class StackError(BrokerError):
    """A stack process that would not start or answer; the hint says what to do, detail shows its log."""


@dataclass(frozen=True)
class ProcessView:
    name: str
    role: str
    pid: int
    running: bool
    health: str
    endpoint: str
    log: str


TRACE = "MYOLO_TRACEMALLOC_"
Progress = Callable[[str], None]


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    """Our environment without MYOLO_* overrides (they would point a stack process at another cluster), but
    with a diagnosis run's ``MYOLO_TRACEMALLOC_*`` (common/memtrace.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYOLO_") or k.startswith(TRACE)} | extra
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _launch(
    state_dir: Path,
    name: str,
    role: str,
    program: list[str],
    doc: dict,
    ports: dict[str, int],
    info: dict,
    extra_env: dict[str, str] | None = None,
) -> state.ProcessRecord:
    workdir = state_dir / f"{role}s" / name
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / f"{role}.toml"
    config.write_text(configs.toml(doc))
    log = workdir / f"{role}.log"
    cmd = [sys.executable, "-m", *program, "--config", str(config), "--log-json"]
    with open(log, "ab") as sink:
        sink.write(LAUNCH_HEADER + f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(cmd)}\n".encode())
        sink.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=_child_env(extra_env or {}),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return state.ProcessRecord(
        name=name,
        role=role,
        pid=proc.pid,
        marker=str(config),
        log=str(log),
        ports=ports,
        started_at=time.time(),
        info={**info, "config": str(config)},
    )


def start_members(
    state_dir: Path,
    *,
    coordinators: int,
    nodes: int,
    gpus: int,
    timeout: float,
    progress: Progress,
    bootstrap: str | None = None,
    kafka_extra: dict[str, Any] | None = None,
    releases_extra: dict[str, Any] | None = None,
) -> list[tuple[state.ProcessRecord, bool]]:
    """Start what is missing of coordinator-1..C and node-1..N (running ones are kept), wait until they answer.

    Returns every wanted record with True for the ones started now. On a failure the processes started by
    this call are stopped again and StackError carries the log of the one that failed. ``bootstrap``: where the
    members reach Kafka, when not the broker's own address (a proxy in front of it, for the chaos tests);
    ``kafka_extra``: more ``[kafka]`` settings for every member started now (the soak's small dedupe windows);
    ``releases_extra``: more ``[releases]`` settings for every agent started now (a test's shorter trial).
    """
    stack = state.load(state_dir)
    if not stack.bootstrap:
        raise StackError(
            "the local Kafka broker is not running", hint="run `myoloctl local up` (it starts Kafka first)"
        )
    key = configs.signing_key(state_dir)
    wanted = [(f"coordinator-{i}", COORDINATOR) for i in range(1, coordinators + 1)]
    wanted += [(f"node-{i}", AGENT) for i in range(1, nodes + 1)]
    result: list[tuple[state.ProcessRecord, bool]] = []
    started: list[state.ProcessRecord] = []
    with state.locked(state_dir):
        stack = state.load(state_dir)
        running = {name for name, _ in wanted if _running(stack.find(name))}
        kafka = security.member_kafka(state_dir, stack, [(n, r) for n, r in wanted if n not in running])
        for name, role in wanted:
            record = stack.find(name)
            if record is not None and name in running:
                result.append((record, False))
                continue
            settings = {**kafka[name], **(kafka_extra or {})}
            record = _start_one(
                state_dir, name, role, bootstrap or stack.bootstrap or "", gpus, key, settings, releases_extra or {}
            )
            stack.put(record)
            state.save(state_dir, stack)
            started.append(record)
            result.append((record, True))
            progress(f"started {role} {name} (pid {record.pid})")
    try:
        _wait_answering(state_dir, [r for r, _ in result], timeout)
        _enroll(state_dir, result, timeout, progress)
        prometheus.write_config(state_dir)
    except StackError:
        stop_records(started)
        with state.locked(state_dir):
            stack = state.load(state_dir)
            for record in started:
                stack.drop(record.name)
            state.save(state_dir, stack)
        raise
    return result


def _enroll(
    state_dir: Path, members: list[tuple[state.ProcessRecord, bool]], timeout: float, progress: Progress
) -> None:
    """Enrol the keys of the stack's agents (those just started and any already running) with its coordinators,
    as an admin would: until then their faults, acks and training events are refused. Nothing to do without
    a coordinator or an agent."""
    records = [r for r, _ in members] + [p for p in state.load(state_dir).processes if _running(p)]
    urls = list(dict.fromkeys(r.info["api_url"] for r in records if r.role == COORDINATOR and "api_url" in r.info))
    agents = {r.name: Path(r.info["config"]).parent for r in records if r.role == AGENT}
    if not urls or not agents:
        return
    try:
        changes = identity.enroll_agents(urls, agents, stack_token(state_dir), timeout)
    except Refusal as exc:
        raise StackError(
            f"could not enrol the agents' node keys: {exc.render()}",
            hint="`myoloctl local status` shows each coordinator and its log",
        ) from None
    fresh = sorted(n for n, change in changes.items() if change != "unchanged")
    if fresh:
        progress(f"enrolled the node keys of {', '.join(fresh)}")


def _running(record: state.ProcessRecord | None) -> bool:
    return record is not None and process.alive(record.pid, record.marker)


def _start_one(
    state_dir: Path,
    name: str,
    role: str,
    bootstrap: str,
    gpus: int,
    key: Path,
    kafka: dict[str, Any],
    releases: dict[str, Any],
) -> state.ProcessRecord:
    """Launch one member on port 0: the kernel gives it a free port as it binds, which it logs; the port is
    read back from there and recorded (``_wait_answering``), and an agent's is written into its config so a
    restart by its launcher binds it again. A port picked free here and bound seconds later by the process
    could be taken by another process in between. ``kafka``: its security settings (the
    security step's), added to its config's ``[kafka]``; ``releases``, an agent's, to its ``[releases]``."""
    workdir = state_dir / f"{role}s" / name
    if role == COORDINATOR:
        doc = configs.coordinator_config(name, workdir, bootstrap=bootstrap, api_port=0, key_file=key)
        doc["kafka"] |= kafka
        return _launch(state_dir, name, role, ["myolo.coordinator.cli_daemon", "run"], doc, {}, {})
    identity.make_node_key(workdir)  # made here so it can be enrolled; the agent finds it in its data dir
    doc = configs.agent_config(name, workdir, bootstrap=bootstrap, gpus=gpus, health_port=0, key_file=key)
    doc["kafka"] |= kafka
    doc["releases"] |= releases
    info = {"socket": str(workdir / "agent.sock"), "gpus": str(gpus)}
    # under its launcher, as the unit runs it: a release that never commits itself is taken back
    return _launch(state_dir, name, role, ["myolo.agent.launcher"], doc, {}, info, configs.agent_env(key))


def _endpoint(record: state.ProcessRecord) -> str:
    return record.info.get("api_url") or record.info.get("health_url") or ""


def listening_url(record: state.ProcessRecord) -> str | None:
    """The URL the process's latest launch logged it listens on (``--log-json`` lines after the last launch
    header), without a path; None until it has."""
    event = LISTENING[record.role][0]
    try:
        text = Path(record.log).read_bytes()
    except OSError:
        return None
    found = None
    for line in text[text.rfind(LAUNCH_HEADER) + 1 :].splitlines()[1:]:
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # the header, a line still being written, or not ours
        if isinstance(doc, dict) and doc.get("event") == event and isinstance(doc.get("url"), str):
            found = doc["url"]
    if found is None:
        return None
    parts = urlsplit(found)
    return f"{parts.scheme}://{parts.netloc}"


def _record_url(state_dir: Path, record: state.ProcessRecord, url: str) -> None:
    """Note where ``record``'s process listens, in the record and in the state file (same place in the list)."""
    _, port_key, url_key = LISTENING[record.role]
    record.ports[port_key] = urlsplit(url).port or 0
    record.info[url_key] = url
    if record.role == AGENT and record.ports[port_key]:
        _pin_health_port(Path(record.info["config"]), record.ports[port_key])
    with state.locked(state_dir):
        stack = state.load(state_dir)
        saved = stack.find(record.name)
        if saved is not None and saved.pid == record.pid:
            saved.ports[port_key], saved.info[url_key] = record.ports[port_key], url
            state.save(state_dir, stack)


def _pin_health_port(config: Path, port: int) -> None:
    """The agent's endpoint keeps the port it got: its launcher restarts it with this config, and Prometheus
    (``prometheus.py``'s targets) and the records keep reaching it there."""
    try:
        doc = tomllib.loads(config.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return
    if doc.get("health", {}).get("port") == 0:
        doc["health"]["port"] = port
        atomic_write(config, configs.toml(doc).encode(), durable=False)


def _wait_answering(state_dir: Path, records: list[state.ProcessRecord], timeout: float) -> None:
    """Until every coordinator's API and every agent's health endpoint answers (or one process dies). A
    process's URL is read back from its log where the recorded one is not known yet or no longer answers."""
    deadline = time.monotonic() + timeout
    pending = list(records)
    while pending:
        for record in list(pending):
            if not process.alive(record.pid, record.marker):
                how = process.exit_status(record.pid)
                raise StackError(
                    f"{record.role} {record.name} (pid {record.pid}) exited while starting"
                    + (f" ({how})" if how else ""),
                    hint=f"read its log {record.log}",
                    detail=process.tail(Path(record.log), 25),
                )
            if _endpoint(record) and health.get_json(f"{_endpoint(record)}/healthz", timeout=0.5) is not None:
                pending.remove(record)
                continue
            # not known yet, or moved: an agent restarted by its launcher (after an upgrade, a crash) listens on
            # the port the kernel gives it then, which its log says last
            url = listening_url(record)
            if url is not None and url != _endpoint(record):
                _record_url(state_dir, record, url)
        if pending and time.monotonic() > deadline:
            names = ", ".join(r.name for r in pending)
            raise StackError(
                f"{names} did not answer within {timeout:.0f} s",
                hint=f"read the log {pending[0].log}; a slow machine may need a longer --timeout",
                detail=process.tail(Path(pending[0].log), 25),
            )
        if pending:
            time.sleep(0.2)


def stop_records(records: list[state.ProcessRecord], timeout: float = 20.0) -> list[tuple[state.ProcessRecord, str]]:
    """SIGTERM all of them at once, SIGKILL those still there after ``timeout``; returns each outcome."""
    if not records:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(records))) as pool:
        outcomes = list(pool.map(lambda r: process.terminate(r.pid, r.marker, timeout), records))
    return list(zip(records, outcomes, strict=True))


def stop_members(state_dir: Path, progress: Progress) -> list[tuple[state.ProcessRecord, str]]:
    """Stop every agent, then every coordinator, and drop them from the state file."""
    done: list[tuple[state.ProcessRecord, str]] = []
    for role in STOP_ORDER:
        with state.locked(state_dir):
            records = [p for p in state.load(state_dir).processes if p.role == role]
        for record, outcome in stop_records(records):
            progress(f"{role} {record.name} {_said(outcome)} (pid {record.pid})")
            done.append((record, outcome))
        with state.locked(state_dir):
            stack = state.load(state_dir)
            for record in records:
                stack.drop(record.name)
            state.save(state_dir, stack)
    prometheus.write_targets(state_dir)
    return done


def _said(outcome: str) -> str:
    return {"stopped": "stopped", "killed": "killed (did not stop within 20 s)"}.get(outcome, "was not running")


def view_members(state_dir: Path) -> list[ProcessView]:
    """Every coordinator and agent of the stack with its liveness and health, in start order."""
    views = []
    for record in state.load(state_dir).processes:
        if record.role not in (COORDINATOR, AGENT):
            continue
        running = process.alive(record.pid, record.marker)
        url = _endpoint(record) or listening_url(record) or ""  # not recorded yet: an `up` still waits on it
        if not running:
            verdict = "exited"
        elif record.role == COORDINATOR:
            verdict = health.coordinator_health(url)
        else:
            verdict = health.agent_health(url)
        views.append(ProcessView(record.name, record.role, record.pid, running, verdict, url, record.log))
    return views


def wait_fleet(api_urls: list[str], node_ids: list[str], timeout: float, token: str | None = None) -> None:
    """Until one coordinator leads, every coordinator joined the group generation that elected it, and each lists
    every node as Ready (the stack is usable, and no join still pending will move leadership). ``token``: the API
    token to read the nodes with (the stack's admin token)."""
    deadline = time.monotonic() + timeout
    missing = "one leader that every coordinator follows"
    while time.monotonic() < deadline:
        missing = _fleet_missing(api_urls, set(node_ids), token)
        if not missing:
            return
        time.sleep(0.25)
    raise StackError(
        f"the stack runs but is not ready after {timeout:.0f} s: waiting for {missing}",
        hint="`myoloctl local status` shows each process and its log",
    )


def _fleet_missing(api_urls: list[str], node_ids: set[str], token: str | None) -> str:
    bodies = []
    for url in api_urls:
        answer = health.get_json(f"{url}/v1/nodes", token=token)
        if answer is None or answer[0] != 200:
            return f"{url} to answer"
        ready = {n["node_id"] for n in answer[1]["items"] if n["liveness"] == "Ready"}
        if node_ids - ready:
            return f"{', '.join(sorted(node_ids - ready))} Ready on {url}"
        role = health.get_json(f"{url}/healthz")
        if role is None or not isinstance(role[1], dict):
            return f"{url}/healthz to answer"
        bodies.append(role[1])
    return "" if not api_urls or health.settled_leader(bodies) else "one leader that every coordinator follows"
