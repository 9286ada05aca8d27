"""What the rollouts component writes to ``myolo.state.rollouts`` (keyed by rollout name): one record per
rollout: its ``spec`` (the release, the plan, who asked) and its ``status`` (the phase, the waves with their
nodes, step, the commands sent, each node's version before, and the history). It is written before every
action, so a new leader resumes the rollout where it was. Records are frozen: a step makes a new one
(``with_status``), kept in memory only once the state topic took it."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from myolo.coordinator.rollouts.config import Plan
from myolo.coordinator.state.flat import split_flat
from myolo.events.payloads.models import GateResult

Phase = Literal["Progressing", "Paused", "RollingBack", "Succeeded", "RolledBack", "Aborted"]
TERMINAL: frozenset[str] = frozenset({"Succeeded", "RolledBack", "Aborted"})
# a wave's own progress: cordon and drain, upgrade, wait for the new version healthy, bake, judged
Step = Literal["pending", "draining", "upgrading", "baking", "passed", "failed"]
MAX_HISTORY = 200
ROLLOUT_BY = "auto:rollout"  # the author of the cordons a rollout sets (and only it lifts)


class Wave(msgspec.Struct, kw_only=True, frozen=True):
    index: int
    percent: float  # the share of the rollout's nodes upgraded once this wave is done
    nodes: list[str]
    step: Step = "pending"
    started: float | None = None
    step_since: float | None = None
    upgraded_at: float | None = None  # every node back on the new version, healthy (the bake starts)
    bake_until: float | None = None
    previous: dict[str, str] = {}  # node -> the version it ran before (what a rollback returns to)
    commands: dict[str, str] = {}  # node -> the upgrade command id
    rollbacks: dict[str, str] = {}  # node -> the rollback command id
    baseline: dict[str, float] = {}  # job -> per-replica tokens/s before the wave
    gates: list[GateResult] = []


class Change(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    time: float
    phase: str
    wave: int | None = None
    reason: str = ""
    by: str = "auto"


class RolloutSpec(msgspec.Struct, kw_only=True, frozen=True):
    """What was asked for: the release to install, how (the plan), by whom and from where. It never changes:
    the operator's pause, resume, abort and undo are transitions the controller records in the status."""

    component: str  # agent | trainer
    version: str
    artifact: str
    sha256: str
    by: str
    source: str = "operator"  # operator | release
    plan: Plan = msgspec.field(default_factory=Plan)


class RolloutStatus(msgspec.Struct, kw_only=True, frozen=True):
    """What the controller observed and decided: the phase, the waves as they went, the nodes left out, the
    failed gate and the history of phases."""

    updated: float
    phase: Phase = "Progressing"
    reason: str = ""
    wave: int = 0  # the wave in progress (or the last one)
    waves: list[Wave] = []
    skipped: dict[str, str] = {}  # node -> why it is not in the plan (cordoned, not Ready)
    failed_gate: GateResult | None = None
    # node -> what it reported of the release by itself (a trial it failed), learnt even after the gate failed
    taken_back: dict[str, str] = {}
    ending: Phase = "RolledBack"  # where RollingBack ends: RolledBack (a gate, undo) or Aborted (abort)
    history: list[Change] = []


class RolloutRecord(msgspec.Struct, kw_only=True, frozen=True):
    name: str
    created: float
    spec: RolloutSpec
    status: RolloutStatus

    @property
    def terminal(self) -> bool:
        return self.status.phase in TERMINAL

    @classmethod
    def from_flat(cls, raw: bytes) -> RolloutRecord:
        """A rollout record written before spec and status were apart."""
        return split_flat(raw, cls, _OWN, {f: f for f in RolloutSpec.__struct_fields__})

    def with_wave(self, wave: Wave) -> list[Wave]:
        """The waves with ``wave`` in place of the one of its index (for ``with_status``)."""
        return [wave if w.index == wave.index else w for w in self.status.waves]

    def upgraded_nodes(self) -> list[str]:
        """Nodes an upgrade command was sent to (whatever became of it): what a rollback must cover."""
        return [n for w in self.status.waves for n in w.commands]


def with_status(rec: RolloutRecord, **changes: Any) -> RolloutRecord:
    """``rec`` with ``changes`` to its status (a new record; not written yet)."""
    return msgspec.structs.replace(rec, status=msgspec.structs.replace(rec.status, **changes))


_OWN = frozenset({"name", "created"})
STATE_ROLLOUTS = "myolo.state.rollouts"  # the compacted topic they are written to
