"""The rollouts' records: the one way they are written (the state topic first, then memory, then the phase
event) and read (newest first, the one active)."""

from __future__ import annotations

from typing import Any

from myolo.coordinator.core.context import Context
from myolo.coordinator.rollouts.records import MAX_HISTORY, STATE_ROLLOUTS, Change, Phase, RolloutRecord, with_status
from myolo.events.payloads.models import RolloutPhaseChanged


class RolloutStore:
    """Every rollout's record as the state topic has it."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.records: dict[str, RolloutRecord] = {}

    def rollouts(self) -> tuple[RolloutRecord, ...]:
        """Every rollout, newest first."""
        return tuple(sorted(self.records.values(), key=lambda r: (-r.created, r.name)))

    def active(self) -> RolloutRecord | None:
        return next((r for r in self.rollouts() if not r.terminal), None)

    def followed(self, key: str, record: RolloutRecord | None) -> None:
        """A record read from the state topic (None: a tombstone)."""
        if record is None:
            self.records.pop(key, None)
        else:
            self.records[record.name] = record

    async def save(
        self, rec: RolloutRecord, phase: Phase, reason: str, by: str = "auto", **changes: Any
    ) -> RolloutRecord:
        """Write the next record (``rec`` with ``changes``, the phase and a history entry), then keep it and
        announce the phase: memory never runs ahead of the state topic. Returns the record written."""
        now = self.ctx.clock.now()
        new = with_status(rec, phase=phase, reason=reason, updated=now, **changes)
        change = Change(time=now, phase=phase, wave=new.status.wave, reason=reason, by=by)
        new = with_status(new, history=[*rec.status.history, change][-MAX_HISTORY:])
        await self.ctx.store.put(STATE_ROLLOUTS, new.name, new)
        self.records[new.name] = new
        wave = new.status.waves[new.status.wave] if new.status.waves else None
        await self.ctx.producer.send(
            RolloutPhaseChanged(
                rollout=new.name,
                component=new.spec.component,
                version=new.spec.version,
                phase=phase,
                wave=new.status.wave + 1,
                waves=len(new.status.waves),
                reason=reason[:2000],
                by=by,
                gates=wave.gates if wave else [],
            )
        )
        return new
