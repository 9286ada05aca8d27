"""torchrun elastic, the peer side of the elastic benchmark (bench_elastic.py): the same tiny job over three
simulated nodes, the same node failure, timed from the fault to the first step of the next round, and goodput
under a fault every few minutes.

A "node" is one torchrun agent (``--nnodes=1:3 --nproc-per-node=1``, c10d rendezvous on loopback) started in
a session of its own; torchrun starts its worker in yet another session, so a node failure is a ``kill -9``
of the agent's process group and of its worker's. The agent that binds the rendezvous port first hosts the
c10d store; killing that one ends the job for every agent (a different experiment), so faults spare it.

Times come from the arrival of lines on the agents' pipes, on this process's monotonic clock: torchrun's own
INFO lines (``LOGLEVEL=INFO``) and its rendezvous DEBUG lines (``TORCH_LOGS``), the worker's structlog lines
(``op backends selected``, ``resumed from checkpoint``) and rank 0's ``@myolo`` step records.

Not a ``bench_`` module: the elastic benchmark calls ``run_torchrun_failover`` / ``run_torchrun_goodput``
beside its Myolotrain side and shares ``ELASTIC_JOB``, ``split_rounds`` and ``goodput``;
``python -m tests.benchmarks.elastic_torchrun`` runs the torchrun side alone.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec
import psutil
import structlog

from myolo.events.payloads.trainer_job import TrainerJob
from myolo.kernels.train import progress
from myolo.kernels.train.records import Record, StartRecord, StepRecord
from tests.benchmarks.common import write_result

log = structlog.get_logger("myolo.bench.elastic")

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).with_name("torchrun")
NODES = 3
# The job of the tiny-pretrain example manifest (spec.trainer), resumable so a restart continues from the newest
# checkpoint. Its snapshotEvery is left to a parameter: host-memory snapshots are the trainer's feature, and
# on one machine every "node" would share /dev/shm, which no two real nodes do.
ELASTIC_JOB = TrainerJob.from_fields(
    {
        "model.name": "tiny",
        "optimizer.steps": 400,
        "data.global_batch": 12,
        "data.seq_len": 64,
        "runtime.seed": 0,
        "checkpoint.every": 20,
        "checkpoint.resume": True,
    }
)


def with_fields(job: TrainerJob, fields: dict[str, Any]) -> TrainerJob:
    """``job`` with ``fields`` by path changed (``{"optimizer.steps": 100}``), checked as any job is."""
    return TrainerJob.from_fields(fields, msgspec.to_builtins(job))


SHARE_STORE_OFF = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
TAG = "MYOLO_BENCH_TAG"  # set in every agent's environment (workers inherit it): the sweep finds strays by it
RDZV_LOGGER = "torch.distributed.elastic.rendezvous.dynamic_rendezvous"
POLL_S = 0.05
GOODPUT_POLL_S = 0.2  # a long run re-reads its rounds every poll: keep that cost off the two cores

# torchrun's own lines (substring -> marker), in the order a restart passes them.
AGENT_MARKERS: tuple[tuple[str, str], ...] = (
    ("worker_failed", "failed (exitcode"),
    ("restart_decided", "Worker group FAILED"),
    ("rendezvous_started", "Rendezvous'ing worker group"),
    ("dead_node_evicted", "Detected dead node"),
    ("joined_next_round", "added itself to the participants of round"),
    ("rendezvous_complete", "Rendezvous complete for workers"),
    ("workers_started", "Starting worker group"),
)
# The worker's structlog events that close a phase of its start-up.
WORKER_MARKERS: tuple[tuple[str, str], ...] = (
    ("process_group_joined", "op backends selected"),  # logged right after init_process_group and the mesh
    ("restored", "resumed from checkpoint"),
)
NOT_MEASURABLE = {
    "decision": "torchrun takes no decision of its own: an agent restarts when its local worker exits, and the "
    "survivors' workers exit because the dead peer's sockets were closed (collateral gloo errors)",
    "stop": "nothing is stopped: the survivors' workers have already died of the peer's closed socket when the "
    "agent notices; 'Stopping worker group' follows 'Worker group FAILED' within the same millisecond",
}
DETECTION_CAVEAT = (
    "detection here is fast only because the kernel closes a killed process's sockets, so the survivors' gloo "
    "calls fail at once; a lost machine closes nothing: the survivors then block until the collective times out "
    "(the trainer's process-group timeout, 300 s) and torchrun's keep-alive (5 s, dead after 3 misses) only "
    "evicts the node from the rendezvous, it does not restart anyone"
)


# ---------------------------------------------------------------------------------------------- processes
@dataclass(frozen=True)
class Line:
    at: float  # monotonic time the line was read
    text: str


@dataclass
class Node:
    """One torchrun agent ("node") and every line it and its worker wrote."""

    name: str
    proc: subprocess.Popen[str]
    started_at: float
    out: list[Line] = field(default_factory=list)
    err: list[Line] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)
    killed_at: float | None = None
    records: list[Seen] = field(default_factory=list)  # rank 0's records among ``out``, parsed once
    parsed: int = 0  # lines of ``out`` parsed into ``records``

    def new_records(self) -> list[Seen]:
        """Every record this node's worker wrote so far (lines read since the last call are parsed now)."""
        lines = self.out[:]
        for ln in lines[self.parsed :]:
            rec = progress.parse(ln.text)
            if rec is not None:
                self.records.append(Seen(ln.at, self.name, rec))
        self.parsed = len(lines)
        return self.records

    def groups(self) -> set[int]:
        """The agent's process group and those of its descendants (torchrun's workers have their own).

        Empty once the agent has been reaped: its pid, and so its group id, may be a stranger's by then (what
        it left behind carries the run's tag and is swept by ``Cluster.close``)."""
        if self.proc.poll() is not None:
            return set()
        found = {self.proc.pid}
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                with contextlib.suppress(ProcessLookupError):
                    found.add(os.getpgid(child.pid))
        found.discard(os.getpgrp())  # never our own
        return found

    def kill(self) -> float:
        """``kill -9`` of every group of this node at once; the time just before the first signal."""
        groups = self.groups()
        t = time.monotonic()
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        if self.killed_at is None:
            self.killed_at = t
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        return t

    def alive(self) -> bool:
        return self.killed_at is None and self.proc.poll() is None

    def hosts_store(self, port: int) -> bool:
        try:
            conns = psutil.Process(self.proc.pid).net_connections(kind="tcp")
        except psutil.Error:
            return False
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns)

    def first(self, needle: str, after: float) -> Line | None:
        return next((ln for ln in self.err if ln.at >= after and needle in ln.text), None)

    def worker_event(self, event: str, after: float) -> tuple[float, dict[str, Any]] | None:
        """The first structlog JSON line of the worker with this ``event`` read after ``after``."""
        for ln in self.err:
            if ln.at >= after and ln.text.startswith("{") and event in ln.text:
                with contextlib.suppress(json.JSONDecodeError):
                    doc = json.loads(ln.text)
                    if doc.get("event") == event:
                        return ln.at, doc
        return None


def _read(stream: IO[str], into: list[Line]) -> None:
    for text in stream:
        into.append(Line(time.monotonic(), text.rstrip("\n")))
    stream.close()


def free_port() -> int:
    """A port the kernel says is free now; torchrun needs the number up front (a small window remains)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """Three (or more, over time) torchrun agents of one job on loopback, and their cleanup.

    ``close`` kills every node's groups, then sweeps any process still carrying this run's tag in its
    environment (a bug if there is one: the result says so), and writes each node's lines to ``workdir``."""

    def __init__(
        self, workdir: Path, job: TrainerJob, *, share_store: bool, max_restarts: int, rdzv_conf: str | None
    ) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.rdzv_id = f"bench-{uuid.uuid4().hex[:8]}"
        self.tag = self.rdzv_id
        self.share_store = share_store
        self.max_restarts = max_restarts
        self.rdzv_conf = rdzv_conf
        self.job = job
        self.nodes: list[Node] = []
        self.job_file = workdir / "job.json"
        body = msgspec.to_builtins(job)
        body["job_id"] = self.rdzv_id  # its own host-memory snapshot names, never a stale run's
        body.setdefault("checkpoint", {})["dir"] = str(workdir / "checkpoints")
        self.job_file.write_text(json.dumps(body, indent=1))
        self.orphans_swept: list[int] = []

    def env(self) -> dict[str, str]:
        inherited = (
            "TORCHELASTIC_USE_AGENT_STORE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "MYOLO_ZMQ_PROGRESS",
            "MYOLO_ZMQ_CONTROL",
        )
        env = {k: v for k, v in os.environ.items() if k not in (*inherited, SHARE_STORE_OFF)}
        env.update(
            {
                TAG: self.tag,
                "GLOO_SOCKET_IFNAME": "lo",
                "LOGLEVEL": "INFO",  # torchrun's agent lines (restart, rendezvous) are INFO
                "TORCH_LOGS": f"+{RDZV_LOGGER}",  # the rendezvous' own steps (join, dead node) are DEBUG
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
            }
        )
        if not self.share_store:
            env[SHARE_STORE_OFF] = "1"
        return env

    def argv(self, name: str) -> list[str]:
        logs = self.workdir / name / "torchelastic"  # torchrun's own log dir, else a stray one in /tmp
        conf = ["--rdzv-conf", self.rdzv_conf] if self.rdzv_conf else []
        return [
            str(TORCHRUN),
            f"--nnodes=1:{NODES}",
            "--nproc-per-node=1",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{self.port}",
            f"--rdzv-id={self.rdzv_id}",
            f"--max-restarts={self.max_restarts}",
            "--local-addr=127.0.0.1",
            f"--log-dir={logs}",
            *conf,
            "-m",
            "myolo.kernels.cli.worker",
            "--config",
            str(self.job_file),
        ]

    def start(self, name: str) -> Node:
        (self.workdir / name).mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            self.argv(name),
            cwd=ROOT,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        node = Node(name, proc, time.monotonic())
        assert proc.stdout is not None and proc.stderr is not None
        node.readers = [
            threading.Thread(target=_read, args=(proc.stdout, node.out), daemon=True),
            threading.Thread(target=_read, args=(proc.stderr, node.err), daemon=True),
        ]
        for t in node.readers:
            t.start()
        self.nodes.append(node)
        log.info("torchrun agent started", node=name, pid=proc.pid, port=self.port)
        return node

    def launch(self, timeout_s: float) -> float:
        """Start the nodes: the first alone until it listens on the rendezvous port (it hosts the store)."""
        t0 = time.monotonic()
        first = self.start("node0")
        wait_for(lambda: first.hosts_store(self.port), timeout_s, "node0 to host the c10d store", self)
        for i in range(1, NODES):
            self.start(f"node{i}")
        return t0

    def store_host(self) -> Node | None:
        return next((n for n in self.nodes if n.alive() and n.hosts_store(self.port)), None)

    def victim(self) -> Node | None:
        """The oldest live node that does not host the store (None when there is none to fail)."""
        host = self.store_host()
        return next((n for n in self.nodes if n.alive() and n is not host), None) if host else None

    def seen(self) -> list[Seen]:
        return merged_records(self.nodes)

    def facts(self) -> dict[str, Any]:
        """What was run: the setting, the job, torch, and the rendezvous options torchrun printed at start."""
        line = self.nodes[0].first("rdzv_configs", 0.0) if self.nodes else None
        return {
            "setting": setting_name(self.share_store),
            "share_store": self.share_store,
            "job": msgspec.to_builtins(with_fields(self.job, {"checkpoint.dir": "<workdir>/checkpoints"})),
            "torch": importlib.metadata.version("torch"),
            "nodes": NODES,
            "max_restarts": self.max_restarts,
            "rdzv_conf": self.rdzv_conf or "torch defaults",
            "agent_rdzv_configs": line.text.split("rdzv_configs", 1)[1].strip(" :") if line else None,
        }

    def close(self) -> dict[str, Any]:
        for node in self.nodes:
            node.kill()
        self.orphans_swept = sweep(self.tag)
        for node in self.nodes:
            for t in node.readers:
                t.join(timeout=10)
            dump(node, self.workdir / node.name)
        left = tagged(self.tag)
        return {"orphans_swept": self.orphans_swept, "processes_left": [p.pid for p in left]}


def tagged(tag: str) -> list[psutil.Process]:
    """Every process whose environment carries this run's tag (ours only: others' environ is unreadable)."""
    found = []
    for p in psutil.process_iter(["environ"], ad_value=None):
        env = p.info.get("environ") or {}
        if env.get(TAG) == tag and p.pid != os.getpid():
            found.append(p)
    return found


def sweep(tag: str) -> list[int]:
    """Kill any process of this run that outlived its node's group kill; their pids (none expected)."""
    strays = tagged(tag)
    for p in strays:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(strays, timeout=10)
    return [p.pid for p in strays]


def dump(node: Node, directory: Path) -> None:
    """The node's lines with their arrival time since the agent started, for reading a run afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, lines in (("stdout.log", node.out), ("stderr.log", node.err)):
        text = "".join(f"[{ln.at - node.started_at:9.3f}] {ln.text}\n" for ln in lines)
        (directory / name).write_text(text)


def wait_for(ok: Callable[[], bool], timeout_s: float, what: str, cluster: Cluster | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout_s:.0f} s")
        if cluster is not None and cluster.nodes and not any(n.alive() for n in cluster.nodes):
            raise RuntimeError(f"every torchrun agent exited while waiting for {what}")
        time.sleep(POLL_S)


@contextlib.contextmanager
def cluster(
    workdir: Path | None, job: TrainerJob, *, share_store: bool, max_restarts: int, rdzv_conf: str | None
) -> Iterator[tuple[Cluster, dict[str, Any]]]:
    """A Cluster in ``workdir`` (a temporary directory when None), closed whatever happens; the dict it
    yields receives the cleanup's findings."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mbe-", dir="/tmp")))
        workdir.mkdir(parents=True, exist_ok=True)
        c = Cluster(workdir, job, share_store=share_store, max_restarts=max_restarts, rdzv_conf=rdzv_conf)
        cleanup: dict[str, Any] = {}
        try:
            yield c, cleanup
        finally:
            cleanup.update(c.close())


# ---------------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Seen:
    at: float
    node: str
    record: Record


def merged_records(nodes: Iterable[Node]) -> list[Seen]:
    """Rank 0's records from every node (rank 0 moves between nodes across rounds), in arrival order."""
    return sorted((s for node in nodes for s in node.new_records()), key=lambda s: s.at)


@dataclass
class Round:
    """One world's run between two restarts: what it resumed from and the steps it finished."""

    started_at: float  # the StartRecord's arrival: model built, checkpoint loaded
    resumed_from: int  # the last step already done (0: from scratch)
    layout: str
    steps: list[tuple[float, int, float]] = field(default_factory=list)  # (arrival, step, step_time_s)

    @property
    def last_step(self) -> int | None:
        return self.steps[-1][1] if self.steps else None


def split_rounds(seen: Iterable[Seen]) -> list[Round]:
    """Rounds from records in arrival order; each StartRecord opens one."""
    rounds: list[Round] = []
    for s in seen:
        if isinstance(s.record, StartRecord):
            rounds.append(Round(s.at, s.record.start_step - 1, s.record.layout))
        elif isinstance(s.record, StepRecord) and rounds:
            rounds[-1].steps.append((s.at, s.record.step, s.record.step_time_s))
    return rounds


@dataclass(frozen=True)
class Goodput:
    wall_s: float
    useful_s: float  # step time of the steps that count
    share: float  # useful_s / wall_s
    steps_counted: int  # distinct step numbers
    completions: int  # every step finished, redone ones included
    steps_redone: int
    redone_s: float  # step time spent on completions a restore later undid


def goodput(completions: Iterable[tuple[int, float]], wall_s: float) -> Goodput:
    """Share of ``wall_s`` spent on steps that count: ``completions`` are (step, step_time_s) in the order
    they finished; a step counts once, at its last completion (an earlier one was undone by a restore)."""
    last: dict[int, float] = {}
    total, n = 0.0, 0
    for step, seconds in completions:
        last[step] = seconds
        total += seconds
        n += 1
    useful = sum(last.values())
    return Goodput(
        wall_s=r3(wall_s),
        useful_s=r3(useful),
        share=round(useful / wall_s, 4) if wall_s > 0 else 0.0,
        steps_counted=len(last),
        completions=n,
        steps_redone=n - len(last),
        redone_s=r3(total - useful),
    )


def r3(x: float) -> float:
    return round(x, 3)


def since(t: float | None, origin: float) -> float | None:
    return None if t is None else r3(t - origin)


def step_time_median(r: Round, skip: int = 2) -> float | None:
    """Median step time of a round without its first steps (warm-up, the first save)."""
    times = sorted(t for _, _, t in r.steps[skip:])
    return r3(times[len(times) // 2]) if times else None


# ---------------------------------------------------------------------------------------------- failover
def restart_marks(survivors: Sequence[Node], fault: float) -> dict[str, list[float | None]]:
    """Per marker, each survivor's first line of it after the fault (seconds from the fault)."""
    marks: dict[str, list[float | None]] = {}
    for name, needle in AGENT_MARKERS:
        marks[name] = [since(getattr(n.first(needle, fault), "at", None), fault) for n in survivors]
    for name, event in WORKER_MARKERS:
        marks[name] = [since((n.worker_event(event, fault) or (None,))[0], fault) for n in survivors]
    return marks


def latest(values: Sequence[float | None]) -> float | None:
    """When every survivor had got there (None if one never did): the next world needs them all."""
    return None if not values or any(v is None for v in values) else max(v for v in values if v is not None)


def gap(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else r3(b - a)


def earliest(values: Sequence[float | None]) -> float | None:
    return min((v for v in values if v is not None), default=None)


# Lines one agent writes for all (whichever syncs the rendezvous state first): the first one counts.
ONCE_FOR_ALL = frozenset({"dead_node_evicted"})


def marker_times(marks: dict[str, list[float | None]]) -> dict[str, float | None]:
    return {name: (earliest(v) if name in ONCE_FOR_ALL else latest(v)) for name, v in marks.items()}


def failover_phases(marks: dict[str, list[float | None]], first_step: float | None) -> dict[str, Any]:
    at = marker_times(marks)
    detected = at["restart_decided"]
    return {
        "detection_s": detected,
        "rendezvous_s": gap(detected, at["rendezvous_complete"]),
        "rendezvous_split_s": {
            "waiting_for_dead_node_eviction": gap(at["rendezvous_started"], at["joined_next_round"]),
            "last_call": gap(at["joined_next_round"], at["rendezvous_complete"]),
        },
        "worker_start_s": gap(at["rendezvous_complete"], at["process_group_joined"]),
        "build_and_restore_s": gap(at["process_group_joined"], at["restored"]),
        "first_step_s": gap(at["restored"], first_step),
        "total_s": first_step,
    }


# What a survivor went through after the fault, counted from torchrun's lines (one each, when all goes well).
RESTART_COUNTS = {
    "worker_group_failed": "Worker group FAILED",
    "rendezvous_completed": "Rendezvous complete for workers",
    "restarted_for_new_nodes": "new nodes from group_rank",
}


def restart_counts(node: Node, fault: float) -> dict[str, int]:
    lines = [ln.text for ln in node.err if ln.at >= fault]
    return {name: sum(needle in text for text in lines) for name, needle in RESTART_COUNTS.items()}


def failure_lines(survivors: Sequence[Node], fault: float, most: int = 5) -> list[str]:
    """Distinct error lines the survivors wrote after the fault, for a round that never trained."""
    found: list[str] = []
    for node in survivors:
        for ln in node.err:
            text = ln.text.strip()
            if ln.at >= fault and ("Error:" in text or "ERROR" in text) and text[:200] not in found:
                found.append(text[:200])
    return found[:most]


def run_torchrun_failover(
    workdir: Path | None = None,
    steps: int = ELASTIC_JOB.optimizer.steps,
    *,
    share_store: bool = False,
    fault_after_step: int = 30,
    max_restarts: int = 3,
    snapshot_every: int = 0,
    rdzv_conf: str | None = None,
    startup_timeout_s: float = 300.0,
    recover_timeout_s: float = 180.0,
    steps_after_recovery: int = 5,
) -> dict[str, Any]:
    """Kill one node (not the store's host) once step ``fault_after_step`` is done; time the survivors'
    restart from their lines. ``share_store=False`` sets TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1."""
    job = with_fields(ELASTIC_JOB, {"optimizer.steps": steps, "checkpoint.snapshot_every": snapshot_every})
    with cluster(workdir, job, share_store=share_store, max_restarts=max_restarts, rdzv_conf=rdzv_conf) as (c, done):
        t0 = c.launch(startup_timeout_s)
        wait_for(lambda: reached(c, fault_after_step), startup_timeout_s, f"step {fault_after_step}", c)
        host, victim = c.store_host(), c.victim()
        if victim is None:
            raise RuntimeError(f"no node to fail besides the store's host ({host and host.name})")
        fault = victim.kill()
        survivors = [n for n in c.nodes if n is not victim]
        log.info("node killed", node=victim.name, store_host=host and host.name, at_s=r3(fault - t0))
        outcome = await_recovery(c, survivors, fault, recover_timeout_s, steps_after_recovery)
        result = {**failover_result(c, t0, fault, victim, host, survivors, outcome), "cleanup": done}
    return result


def setting_name(share_store: bool) -> str:
    return "default (agent's rendezvous store shared with the workers)" if share_store else f"{SHARE_STORE_OFF}=1"


def reached(c: Cluster, step: int) -> bool:
    return any(isinstance(s.record, StepRecord) and s.record.step >= step for s in c.seen())


def await_recovery(c: Cluster, survivors: list[Node], fault: float, timeout_s: float, more: int) -> str:
    """'recovered' once a round that started after the fault has done ``more`` steps; otherwise why not."""
    deadline = fault + timeout_s
    while time.monotonic() < deadline:
        after = [r for r in split_rounds(c.seen()) if r.started_at > fault]
        if after and len(after[-1].steps) >= more:
            return "recovered"
        if not any(n.alive() for n in survivors):
            return "every surviving agent exited"
        time.sleep(POLL_S)
    return f"no round trained {more} steps within {timeout_s:.0f} s of the fault"


def failover_result(
    c: Cluster,
    t0: float,
    fault: float,
    victim: Node,
    host: Node | None,
    survivors: list[Node],
    outcome: str,
) -> dict[str, Any]:
    rounds = split_rounds(c.seen())
    before = [r for r in rounds if r.started_at <= fault]
    after = [r for r in rounds if r.started_at > fault]
    last_before = before[-1].last_step if before else None
    nxt = after[0] if after else None
    first_step = since(nxt.steps[0][0], fault) if nxt and nxt.steps else None
    marks = restart_marks(survivors, fault)
    restored = [n.worker_event("resumed from checkpoint", fault) for n in survivors]
    load_s = [doc.get("load_s") for _, doc in filter(None, restored)]
    recovered = outcome == "recovered"
    not_measured = dict(NOT_MEASURABLE)
    if recovered and not any(restored):
        not_measured["restore"] = "no checkpoint existed yet: the round started from scratch"
    return {
        **c.facts(),
        "recovered": recovered,
        "outcome": outcome,
        "failure_lines": [] if recovered else failure_lines(survivors, fault),
        "agent_exit_codes": {n.name: n.proc.poll() for n in survivors},
        "store_host": host.name if host else None,
        "killed": victim.name,
        "fault_at_s_after_launch": r3(fault - t0),
        "first_step_after_launch_s": since(rounds[0].steps[0][0], t0) if rounds and rounds[0].steps else None,
        "last_step_before_fault": last_before,
        "resumed_from_step": nxt.resumed_from if nxt else None,
        "steps_lost": (last_before - nxt.resumed_from) if nxt and last_before is not None else None,
        "layout_before": before[-1].layout if before else None,
        "layout_after": nxt.layout if nxt else None,
        "step_time_median_s": {
            "before": step_time_median(before[-1]) if before else None,
            "after": step_time_median(nxt) if nxt else None,
        },
        "from_fault_s": {
            **marker_times(marks),
            "detection_first_survivor": earliest(marks["restart_decided"]),
            "start_record": since(nxt.started_at, fault) if nxt else None,
            "first_step": first_step,
        },
        "per_survivor_from_fault_s": {n.name: {k: v[i] for k, v in marks.items()} for i, n in enumerate(survivors)},
        "per_survivor_after_fault": {n.name: restart_counts(n, fault) for n in survivors},
        "phases": failover_phases(marks, first_step),
        "checkpoint_load_s": load_s,
        "not_measured": not_measured,
        "detection_caveat": DETECTION_CAVEAT,
    }


# ---------------------------------------------------------------------------------------------- goodput
@dataclass
class Fault:
    node: str | None  # None: no node but the store's host was alive, so none was failed
    at: float
    rejoined_as: str | None = None
    rejoined_at: float | None = None


def run_torchrun_goodput(
    workdir: Path | None = None,
    duration_s: float = 300.0,
    fault_every_s: float = 120.0,
    *,
    share_store: bool = False,
    steps: int = 100_000,
    max_restarts: int = 100,
    snapshot_every: int = 0,
    rdzv_conf: str | None = None,
    rejoin_timeout_s: float = 90.0,
    startup_timeout_s: float = 300.0,
) -> dict[str, Any]:
    """The job for ``duration_s`` from its first step, a node killed every ``fault_every_s`` from then on; a
    fresh agent replaces it once the smaller world trains again (or after ``rejoin_timeout_s``), as an
    uncordon would. Goodput: step time of the steps that count over the window's wall time."""
    job = with_fields(ELASTIC_JOB, {"optimizer.steps": steps, "checkpoint.snapshot_every": snapshot_every})
    faults: list[Fault] = []
    with cluster(workdir, job, share_store=share_store, max_restarts=max_restarts, rdzv_conf=rdzv_conf) as (c, done):
        t0 = c.launch(startup_timeout_s)
        wait_for(lambda: reached(c, 1), startup_timeout_s, "the first step", c)
        start = next(s.at for s in c.seen() if isinstance(s.record, StepRecord))
        end, next_fault = start + duration_s, start + fault_every_s
        while (now := time.monotonic()) < end:
            if now >= next_fault:
                victim = c.victim()
                faults.append(Fault(victim.name, victim.kill()) if victim else Fault(None, now))
                log.info("node killed", node=victim and victim.name, at_s=r3(faults[-1].at - start))
                next_fault += fault_every_s
            pending = next((f for f in faults if f.node and f.rejoined_at is None), None)
            if pending is not None and (trains_since(c, pending.at) or now - pending.at > rejoin_timeout_s):
                pending.rejoined_as = f"{(pending.node or '').split('.')[0]}.r{len(faults)}"
                pending.rejoined_at = time.monotonic()
                c.start(pending.rejoined_as)
            time.sleep(GOODPUT_POLL_S)
        seen = [s for s in c.seen() if s.at <= end]
        result = {
            **c.facts(),
            "duration_s": duration_s,
            "fault_every_s": fault_every_s,
            "rejoin": f"a fresh agent once the smaller world has trained a step, or {rejoin_timeout_s:.0f} s after "
            "the fault",
            **goodput_result(seen, t0, start, end, faults),
            "cleanup": done,
        }
    return result


def trains_since(c: Cluster, t: float) -> bool:
    return any(r.started_at > t and r.steps for r in split_rounds(c.seen()))


def goodput_result(seen: list[Seen], t0: float, start: float, end: float, faults: list[Fault]) -> dict[str, Any]:
    """Goodput over the window (first step to end) and from the launch; each restart with what it cost."""
    rounds = split_rounds(seen)
    window = [(step, secs) for r in rounds for at, step, secs in r.steps if at > start]
    launch = [(step, secs) for r in rounds for _, step, secs in r.steps]
    first = rounds[0]
    before_fault = [(at, secs) for at, _, secs in first.steps if not faults or at <= faults[0].at]
    steady = (
        round(sum(t for _, t in before_fault[1:]) / (before_fault[-1][0] - before_fault[0][0]), 4)
        if len(before_fault) > 2
        else None
    )
    return {
        "goodput": asdict(goodput(window, end - start)),
        "goodput_from_launch": asdict(goodput(launch, end - t0)),
        "steady_state_share": steady,
        "first_step_after_launch_s": r3(start - t0),
        "faults": [
            {
                "killed": f.node,
                "at_s": r3(f.at - start),
                "rejoined_as": f.rejoined_as,
                "rejoined_at_s": since(f.rejoined_at, start),
            }
            for f in faults
        ],
        "rounds": [round_summary(r, prev, start) for prev, r in zip([None, *rounds], rounds, strict=False)],
    }


def round_summary(r: Round, prev: Round | None, origin: float) -> dict[str, Any]:
    """A round, with the steps the restart before it threw away and how long no step was done."""
    prev_last = prev.steps[-1] if prev and prev.steps else None
    return {
        "started_at_s": r3(r.started_at - origin),
        "layout": r.layout,
        "resumed_from": r.resumed_from,
        "first_step_at_s": since(r.steps[0][0], origin) if r.steps else None,
        "last_step": r.last_step,
        "steps_done": len(r.steps),
        "step_time_median_s": step_time_median(r),
        "steps_lost": (prev_last[1] - r.resumed_from) if prev_last else None,
        "no_step_for_s": gap(prev_last[0], r.steps[0][0]) if prev_last and r.steps else None,
    }


# ---------------------------------------------------------------------------------------------- runner
def rdzv_defaults() -> dict[str, float]:
    """torch's rendezvous timeouts as installed (read after the runs: the import pulls in torch)."""
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import RendezvousTimeout

    t = RendezvousTimeout()
    return {name: getattr(t, name).total_seconds() for name in ("join", "last_call", "close", "heartbeat")}


def main() -> None:
    ap = argparse.ArgumentParser(description="torchrun elastic side of the elastic benchmark")
    ap.add_argument("what", choices=("failover", "goodput", "all"), nargs="?", default="all")
    ap.add_argument("--short", action="store_true", help="goodput over 60 s with a fault every 25 s")
    args = ap.parse_args()
    t_start = time.monotonic()
    out: dict[str, Any] = {}
    if args.what in ("failover", "all"):
        out["failover"] = [run_torchrun_failover(share_store=s) for s in (False, True)]
    if args.what in ("goodput", "all"):
        span = (60.0, 25.0) if args.short else (300.0, 120.0)
        out["goodput"] = run_torchrun_goodput(duration_s=span[0], fault_every_s=span[1])
    out["rendezvous_defaults"] = rdzv_defaults()
    out["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    write_result("elastic_torchrun", {**out, "total_s": round(time.monotonic() - t_start, 1)})


if __name__ == "__main__":
    main()
