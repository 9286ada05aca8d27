"""``make soak``: the local stack for ``MYOLO_SOAK_S`` seconds (1800) under a fault every ~2 min; loses nothing.

Two coordinators, three agents under their launchers, a job training throughout. Every ``MYOLO_SOAK_EVERY_S``
(120) one fault, in a shuffled cycle: XID 79 on a GPU (cordoned; cleared and uncordoned a minute later, as
after a GPU reset), a worker ``kill -9``, an agent ``kill -9`` (its launcher starts it again), the leader
``kill -9`` (started again, as systemd would), a broker restart, a bad release (a wheel that raises at import,
rolled out: its node takes it back). Faults this frequent make the job cordon a node it failed on three times
in a row (``auto:job``), as it should; the soak's operator looks at such a node and lets it work again a minute
later, as after the GPU reset, and the report counts those cordons. At the end it prints and asserts: samples lost (by each agent run's
``seq``: 0), commands run twice (0), every fault handled, the steps the job did again against its checkpoint
interval, each process's RSS slope (under 5 % of its size per hour, at least 2 MiB/h), open files and
processes before and after, dead letters from our own processes (0). Exit code 0 when all of it holds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from myolo.agent.control import ControlError, StatusRequest, call
from myolo.coordinator.cli.main import app as myoloctl_app
from myolo.coordinator.localstack.broker import LocalBroker, state
from myolo.events.codec import decode
from myolo.events.payloads import TrainingProgress
from myolo.events.settings import KafkaSettings
from myolo.events.topics import TRAINING_PROGRESS
from tests.soak.procs import Watch, ours
from tests.support import evidence
from tests.support.coordinator import local
from tests.support.helpers import read_topic
from tests.support.wheel import build_project_wheel

CHECKPOINT_EVERY = 50
# each consumer's dedupe window, full within minutes at the soak's few events a second (100,000 by default:
# hours to fill here), so that the second half's RSS slope judges leaks, not a bounded window still filling
DEDUPE_IDS = 2_000
NODES = local.NODES
OPERATOR_AFTER_S = 60.0  # how long a job-failure cordon stands before the operator clears it
OPERATOR_EVERY_S = 10.0


@dataclass
class Handled:
    kind: str
    at_s: float
    ok: bool
    took_s: float
    detail: str


class Soak:
    def __init__(self, root: Path) -> None:
        self.root = root
        os.environ["MYOLO_STATE_DIR"] = str(root)
        os.environ.setdefault("MALLOC_ARENA_MAX", "2")  # as the systemd units set it for every daemon
        self.cli = CliRunner()
        self.broker = LocalBroker(root, tied_to_parent=True)
        self.began = time.monotonic()
        self.bad_releases = 0
        self.wheel: Path | None = None
        self.job_cordons: dict[str, float] = {}  # node -> when the operator first saw its auto:job cordon
        self.cleared: list[str] = []  # "node at N s: reason" for each job-failure cordon the operator cleared
        self.last_round = 0.0

    # ------------------------------------------------------------------ plumbing
    def myoloctl(self, *args: str) -> Any:
        return self.cli.invoke(myoloctl_app, list(args))

    def get(self, *args: str) -> Any:
        out = self.myoloctl(*args, "-o", "json")
        return json.loads(out.output) if out.exit_code == 0 else None

    def records(self) -> dict[str, state.ProcessRecord]:
        return {p.name: p for p in state.load(self.root).processes}

    def until(self, what: str, check: Callable[[], Any], timeout: float) -> tuple[Any, float]:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            self.operator_round()
            try:
                value = check()
            except (OSError, ValueError, KeyError, TypeError):
                value = None
            if value:
                return value, time.monotonic() - start
            time.sleep(1)
        return None, time.monotonic() - start

    def operator_round(self) -> None:
        """At most every ``OPERATOR_EVERY_S``: clear each ``auto:job`` cordon that stood ``OPERATOR_AFTER_S``
        (the job's answer to the soak's own kills, not a fault of the node)."""
        now = time.monotonic()
        if now - self.last_round < OPERATOR_EVERY_S or self.wheel is None:
            return
        self.last_round = now
        nodes = {n["node_id"]: n for n in (self.get("get", "nodes") or {}).get("items", [])}
        for name in NODES:
            cordon = (nodes.get(name) or {}).get("cordon") or {}
            if not (cordon.get("cordoned") and cordon.get("by") == "auto:job"):
                self.job_cordons.pop(name, None)
                continue
            if now - self.job_cordons.setdefault(name, now) >= OPERATOR_AFTER_S:
                self.myoloctl("uncordon", name, "--reason", "soak: the operator checked the node")
                self.cleared.append(f"{name} at {now - self.began:.0f} s: {cordon.get('reason', '')}")
                self.job_cordons.pop(name)
                self.say(f"operator: uncordoned {name} ({cordon.get('reason', '')})")

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.began:7.1f} s] {text}", flush=True)

    def leader(self) -> str | None:
        for name, r in self.records().items():
            if r.role == "coordinator" and "api_url" in r.info:
                try:
                    with urllib.request.urlopen(f"{r.info['api_url']}/healthz", timeout=3) as resp:
                        if '"leader"' in resp.read().decode():
                            return name
                except OSError:
                    continue
        return None

    def job_running(self) -> dict | None:
        job = self.get("get", "job", "soak")
        gen = (job or {}).get("generation") or {}
        return job if gen.get("stage") == "running" and (job.get("progress") or {}).get("step") else None

    def start(self) -> None:
        self.broker.start(timeout=120)
        self.members()
        self.wheel = build_project_wheel(self.root / "build", "4.0.9.dev7", append={
            "agent/daemon/main.py": 'raise RuntimeError("soak: a release that cannot start")\n'
        })  # fmt: skip
        # every fault of the soak is deliberate: a restart budget per job life (10 by default) would end the job
        # within the hour, which is the budget doing its work, not what the soak is after
        manifest = local.steady_job(
            "soak", self.root / "ckpt", steps=1_000_000, checkpoint_every=CHECKPOINT_EVERY, max_restarts=1000
        )
        (self.root / "soak.yaml").write_text(manifest)
        apply = lambda: self.myoloctl("apply", "-f", str(self.root / "soak.yaml"))  # noqa: E731
        applied, _ = self.until("the job", lambda: apply().exit_code == 0, 60)
        assert applied, f"no leader took the job: {apply().output}"
        job, _ = self.until(
            "the job on 3 replicas", lambda: (j := self.job_running()) and j["generation"]["replicas"] == 3, 240
        )
        assert job, "the job did not start on 3 replicas"
        self.say("stack up: 2 coordinators, 3 agents, job soak on 3 replicas")

    def members(self) -> None:
        local.start_members(self.root, coordinators=2, kafka_extra={"dedupe_window_ids": DEDUPE_IDS}, progress=self.say)

    def stop(self) -> None:
        local.stop_all(self.root, self.broker)

    # ------------------------------------------------------------------ faults
    def xid(self, node: str) -> Handled:
        socket = self.records()[node].info["socket"]
        inject = [sys.executable, "-m", "myolo.agent", "inject", "--socket", socket]
        subprocess.run([*inject, "--gpu", "0", "--xid", "79"], check=True, capture_output=True, timeout=30)
        cordoned, took = self.until(
            f"{node} cordoned",
            lambda: ((n := self.node(node)) or {}).get("cordon") and n["cordon"]["cordoned"],
            30,
        )
        time.sleep(60)  # a minute later the GPU is reset and the operator lets it work again
        subprocess.run([*inject, "--clear"], check=True, capture_output=True, timeout=30)
        self.myoloctl("uncordon", node, "--reason", "soak: GPU reset")
        return Handled("xid79", 0, bool(cordoned), took, f"{node} cordoned in {took:.1f} s, uncordoned after 60 s")

    def node(self, name: str) -> dict | None:
        nodes = self.get("get", "nodes") or {}
        return next((n for n in nodes.get("items", []) if n["node_id"] == name), None)

    def worker_kill(self, node: str) -> Handled:
        job = self.job_running()
        gen = (job or {}).get("generation", {}).get("number")
        try:
            workers = call(self.records()[node].info["socket"], StatusRequest()).data.get("workers") or []
        except ControlError:
            workers = []
        victims = [int(w["pid"]) for w in workers if w.get("state") == "running"]
        if not victims:
            if job is None:  # the job should be training throughout: not running is the fault not handled
                phase = (self.get("get", "job", "soak") or {}).get("phase")
                return Handled("worker_kill", 0, False, 0.0, f"the job was not running (phase {phase})")
            return Handled("worker_kill", 0, True, 0.0, f"no worker ran on {node}: nothing to kill")
        os.kill(victims[0], signal.SIGKILL)
        again, took = self.until(
            "a new generation", lambda: (j := self.job_running()) and j["generation"]["number"] != gen, 180
        )
        return Handled(
            "worker_kill", 0, bool(again), took, f"pid {victims[0]} on {node}; next generation in {took:.1f} s"
        )

    def agent_kill(self, node: str) -> Handled:
        agents = [p for p, (r, m) in ours(self.root).items() if r == "agent" and m == node]
        if not agents:
            return Handled("agent_kill", 0, False, 0.0, f"no agent process found for {node}")
        os.kill(agents[0], signal.SIGKILL)
        back, took = self.until(
            f"{node}'s agent again",
            lambda: (
                [p for p, (r, m) in ours(self.root).items() if r == "agent" and m == node and p != agents[0]]
                and (self.node(node) or {}).get("liveness") == "Ready"
            ),
            120,
        )
        return Handled(
            "agent_kill", 0, bool(back), took, f"pid {agents[0]}; its launcher started it again in {took:.1f} s"
        )

    def leader_kill(self, _: str) -> Handled:
        leader = self.leader()
        if leader is None:
            return Handled("leader_kill", 0, False, 0.0, "no leader found")
        os.kill(self.records()[leader].pid, signal.SIGKILL)
        other, took = self.until("another leader", lambda: (lead := self.leader()) and lead != leader and lead, 60)
        self.members()  # as systemd would (Restart=always): the killed one comes back, as a standby
        return Handled("leader_kill", 0, bool(other), took, f"{leader} killed; {other} led after {took:.1f} s")

    def broker_restart(self, _: str) -> Handled:
        self.broker.stop()
        time.sleep(5)
        self.broker.start(timeout=120)
        ready, took = self.until(
            "every node Ready", lambda: all((self.node(n) or {}).get("liveness") == "Ready" for n in NODES), 180
        )
        return Handled("broker_restart", 0, bool(ready), took, f"down 5 s; every node Ready {took:.1f} s after")

    def bad_release(self, _: str) -> Handled:
        self.bad_releases += 1
        assert self.wheel is not None
        out = self.myoloctl(
            "rollout", "start", "--component", "agent", "--version", "4.0.9.dev7", "--artifact", str(self.wheel),
            "--bake", "20s",
        )  # fmt: skip
        if out.exit_code != 0:
            return Handled("bad_release", 0, False, 0.0, f"rollout not started: {out.output.strip()[-300:]}")
        ended, took = self.until(
            "the rollout to end",
            lambda: (r := self.get("rollout", "status")) and r["phase"] in ("RolledBack", "Succeeded", "Aborted") and r,
            600,
        )
        ok = (
            bool(ended)
            and ended["phase"] == "RolledBack"
            and "node-" in (ended.get("failed_gate") or {}).get("detail", "")
        )
        return Handled("bad_release", 0, ok, took, f"{(ended or {}).get('phase')} in {took:.1f} s")


def steps_redone(settings: KafkaSettings) -> tuple[int, int, int]:
    """(restarts, steps done again in all, the most in one restart), from the rank-0 progress on Kafka."""
    best = redone = worst = restarts = 0
    gen = None
    for r in asyncio_read(settings, TRAINING_PROGRESS):
        data = decode(r.value, r.headers, r.key).data
        if not isinstance(data, TrainingProgress) or data.rank != 0:
            continue
        if gen is not None and data.generation != gen:
            restarts += 1
            again = max(0, best - data.step + 1)
            redone, worst = redone + again, max(worst, again)
        gen, best = data.generation, max(best, data.step)
    return restarts, redone, worst


def asyncio_read(settings: KafkaSettings, topic: str) -> list:
    import asyncio

    return asyncio.run(read_topic(settings, topic))


def main() -> int:
    seconds = float(os.environ.get("MYOLO_SOAK_S", "1800"))
    every = float(os.environ.get("MYOLO_SOAK_EVERY_S", "120"))
    root = Path(os.environ.get("MYOLO_SOAK_DIR") or f"/tmp/myolo-soak-{os.getpid()}")
    root.mkdir(parents=True, exist_ok=True)
    # a TERM (Ctrl-C's cousin from a supervisor or a shell's kill) stops the stack as the end of the run does,
    # instead of leaving its coordinators, agents and workers running
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    soak = Soak(root)
    rng = random.Random(int(os.environ.get("MYOLO_SOAK_SEED", "7")))
    kinds = ["xid", "worker_kill", "agent_kill", "leader_kill", "broker_restart", "bad_release"]
    handled: list[Handled] = []
    try:
        soak.start()
        watch = Watch(root, seconds)
        deadline = time.monotonic() + seconds
        cycle: list[str] = []
        next_fault = time.monotonic() + every
        while time.monotonic() < deadline:
            watch.sample()
            soak.operator_round()
            if time.monotonic() >= next_fault:
                if not cycle:
                    cycle = rng.sample(kinds, len(kinds))
                kind, node = cycle.pop(), rng.choice(NODES)
                soak.say(f"fault: {kind} on {node}")
                at = time.monotonic() - soak.began
                h = getattr(soak, kind)(node)
                h.at_s = at
                handled.append(h)
                soak.say(f"  {'handled' if h.ok else 'NOT HANDLED'}: {h.detail}")
                next_fault = time.monotonic() + every * rng.uniform(0.75, 1.25)
            time.sleep(min(30.0, max(1.0, next_fault - time.monotonic())))
        soak.say("faults over; letting the stack settle")
        settled, _ = soak.until(
            "the job on 3 replicas", lambda: (j := soak.job_running()) and j["generation"]["replicas"] == 3, 300
        )
        time.sleep(30)  # the agents' spools and the last acks
        watch.sample()
        direct = KafkaSettings(bootstrap=soak.broker.bootstrap)
        seen = evidence.samples(direct)
        commands, twice = evidence.commands_run_twice(direct)
        letters = evidence.dead_letters(direct)
        own = {s: n for s, n in letters.items() if s.startswith("/myolo/")}
        restarts, redone, worst = steps_redone(direct)
        lines, problems = watch.report()
        watch.save(root / "rss.json")
    finally:
        soak.stop()
    print(f"\nsoak {seconds:.0f} s, a fault every ~{every:.0f} s: {len(handled)} faults")
    for h in handled:
        print(f"  {h.at_s:7.1f} s {h.kind:15} {'ok ' if h.ok else 'NOT'} {h.detail}")
    print(f"samples in Kafka {seen.total} over {seen.runs} agent runs: lost {seen.lost}, duplicates {seen.duplicates}")
    print(f"commands {commands}, run twice {len(twice)}")
    print(
        f"job restarts {restarts}: steps done again {redone} in all, at most {worst} at once (checkpoint every {CHECKPOINT_EVERY}, snapshot every step)"
    )
    print(f"job-failure cordons (auto:job) the operator cleared after {OPERATOR_AFTER_S:.0f} s: {len(soak.cleared)}")
    for line in soak.cleared:
        print(f"  {line}")
    print(f"dead letters {sum(letters.values())}, from our processes {sum(own.values())} {own or ''}")
    print("\n".join(lines))
    if seen.lost:
        problems.append(f"{seen.lost} sample(s) lost")
    if twice:
        problems.append(f"commands run twice: {twice}")
    if own:
        problems.append(f"dead letters from our own processes: {own}")
    if not settled:
        problems.append("the job was not back on 3 replicas at the end")
    problems += [f"fault not handled: {h.kind} at {h.at_s:.0f} s: {h.detail}" for h in handled if not h.ok]
    if worst > CHECKPOINT_EVERY:
        problems.append(f"a restart redid {worst} steps, more than the checkpoint interval {CHECKPOINT_EVERY}")
    print("\n" + ("PASSED" if not problems else "FAILED:\n  " + "\n  ".join(problems)))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
