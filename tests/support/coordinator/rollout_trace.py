"""A rollout on the local stack seen from outside: what it is doing now, and when each of its steps happened.

``RolloutTrace.sample()`` reads the rollout record, the fleet view, the job and the upgrade commands through
the API (as an operator would) and keeps a timeline of every change it sees (a wave's step, a node's
liveness, version and cordon, the job's generations and their first step, a command's status), timed from
the trace's start. The record's own history and the agents' logs add what sampling cannot see: when the
coordinator took each step, and the agent's install, re-exec and return. ``report()`` is what a failed wait
prints, so a timeout says where the rollout stood; ``steps()`` is the timeline, so a passing run shows where
its time went.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from myolo.coordinator.localstack.broker.state import ProcessRecord

# what the agent logs on its way through an upgrade, and how the timeline names it
AGENT_MARKS = {
    "release installed": "installed",
    "release switched": "switched",
    "stopping to restart into the new version": "stopping",
    "restarting: re-executing the agent": "re-exec",
    "health endpoint listening": "listening",
    "obeying signed coordinator commands": "consuming",
    "ready": "ready",
}


@dataclass
class RolloutTrace:
    myoloctl: Callable[..., Any]
    members: dict[str, ProcessRecord]
    token: str | None
    job: str
    began: float = field(default_factory=time.monotonic)
    timeline: list[tuple[float, str, str]] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)
    _seen: dict[str, str] = field(default_factory=dict)

    def restart(self) -> float:
        """Time the timeline from now (the rollout's start), forgetting what was noted before; returns now."""
        self.began = time.monotonic()
        self.timeline.clear()
        return self.began

    # ---- sampling --------------------------------------------------------------------------------------------
    def sample(self) -> None:
        """Read the state once and note what changed since the last sample."""
        now = {
            "rollout": self._cli("rollout", "status", "-o", "json"),
            "nodes": (self._cli("get", "nodes", "-o", "json") or {}).get("items", []),
            "job": self._cli("get", "job", self.job, "-o", "json"),
            "commands": (self._api("/v1/commands") or {}).get("items", []),
        }
        self.last = now
        rollout = now["rollout"] or {}
        if rollout:
            self._note("rollout", f"{rollout.get('phase')} wave {rollout.get('wave', 0) + 1}")
            for w in rollout.get("waves", []):
                self._note(f"wave {w['index'] + 1}", w["step"])
        for n in now["nodes"]:
            cordoned = (n.get("cordon") or {}).get("cordoned") or n.get("cordoned")
            self._note(n["node_id"], f"{n.get('liveness')} {n.get('health')} v{n.get('agent_version')}")
            self._note(f"{n['node_id']} cordon", "cordoned" if cordoned else "uncordoned")
        gen = (now["job"] or {}).get("generation") or {}
        if gen:
            on = ",".join(m.get("node_id", "?") for m in gen.get("members", []))
            stepped = ", stepping" if gen.get("first_step_at") else ""
            self._note(f"job {self.job}", f"gen {gen.get('number')} {gen.get('stage')}{stepped} on {on}")
        for c in now["commands"]:
            if c.get("action") in ("upgrade", "rollback"):
                self._note(f"{c['node_id']} {c['action']}", f"{c['status']} (attempt {c.get('attempts')})")

    def _note(self, subject: str, state: str) -> None:
        if self._seen.get(subject) != state:
            self._seen[subject] = state
            self.timeline.append((time.monotonic() - self.began, subject, state))

    def _cli(self, *args: str) -> dict[str, Any] | None:
        result = self.myoloctl(*args)
        if result.exit_code != 0:
            return None
        try:
            return json.loads(result.output)
        except ValueError:
            return None

    def _api(self, path: str) -> dict[str, Any] | None:
        """GET from the first coordinator that answers (the leader may have been killed)."""
        for url in self.coordinator_urls():
            req = urllib.request.Request(f"{url}{path}", headers={"Authorization": f"Bearer {self.token}"})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    return json.loads(r.read())
            except (OSError, ValueError):
                continue
        return None

    def coordinator_urls(self) -> list[str]:
        return [r.info["api_url"] for r in self.members.values() if r.role == "coordinator" and "api_url" in r.info]

    # ---- what it shows ---------------------------------------------------------------------------------------
    def agent_marks(self) -> list[tuple[float, str, str]]:
        """The agents' logged steps (install, switch, stop, re-exec, back), on the trace's clock."""
        wall0 = time.time() - (time.monotonic() - self.began)
        out = []
        for name, rec in self.members.items():
            if rec.role != "agent" or not Path(rec.log).exists():
                continue
            for line in Path(rec.log).read_text(errors="replace").splitlines():
                if not line.startswith("{"):
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                mark = AGENT_MARKS.get(entry.get("event", ""))
                stamp = entry.get("timestamp")
                if mark and stamp:
                    t = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - wall0
                    if t >= 0:
                        out.append((t, name, f"agent: {mark}"))
        return out

    def record_marks(self) -> list[tuple[float, str, str]]:
        """The rollout record's own history (its steps as the coordinators timed them), on the trace's clock."""
        wall0 = time.time() - (time.monotonic() - self.began)
        history = (self.last.get("rollout") or {}).get("history") or []
        return [(h["time"] - wall0, "record", h.get("reason", h.get("phase", ""))) for h in history]

    def steps(self) -> str:
        """The timeline (API changes, the record's history, agent log marks), one line each, in s from the
        trace's start."""
        rows = sorted(self.timeline + self.record_marks() + self.agent_marks())
        return "\n".join(f"{t:7.1f}  {subject:<22} {state}" for t, subject, state in rows)

    def report(self) -> str:
        """Where the rollout stands now, then how it got there: what a failed wait prints."""
        self.sample()
        rollout = self.last.get("rollout") or {}
        waves = [
            {k: w.get(k) for k in ("index", "nodes", "step", "started", "step_since", "upgraded_at", "commands")}
            for w in rollout.get("waves", [])
        ]
        head = {k: rollout.get(k) for k in ("name", "phase", "reason", "wave", "updated")}
        nodes = {
            n["node_id"]: {
                k: n.get(k) for k in ("liveness", "health", "health_reasons", "agent_version", "cordoned", "last_seen")
            }
            for n in self.last.get("nodes", [])
        }
        job = self.last.get("job") or {}
        commands = [
            {k: c.get(k) for k in ("node_id", "action", "status", "attempts", "created", "last_sent", "reason")}
            for c in self.last.get("commands", [])
            if c.get("action") in ("upgrade", "rollback")
        ]
        health = {url: self._healthz(url) for url in self.coordinator_urls()}
        parts = [
            ("rollout", head),
            ("waves", waves),
            ("history", (rollout.get("history") or [])[-12:]),
            ("nodes", nodes),
            ("job", {"generation": job.get("generation"), "progress": job.get("progress")}),
            ("upgrade commands", commands),
            ("coordinators", health),
        ]
        state = "\n".join(f"-- {title}: {json.dumps(body, default=str)}" for title, body in parts)
        return f"{state}\n-- timeline (s since the trace began):\n{self.steps()}"

    @staticmethod
    def _healthz(url: str) -> str:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as r:
                return r.read().decode()[:600]
        except OSError as exc:
            return f"no answer ({exc})"
