"""At most one progress event per job per interval; the latest step always goes out.

Why: a job stepping 10 times a second on 8 GPUs would otherwise put 80 events a second per node on Kafka,
while the coordinator's policies need about one a second. Records arriving inside the interval replace the
pending one (newest step wins); ``due`` hands it over when the interval has passed, and ``flush`` hands over
whatever is pending when the job ends, so the last step is never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from myolo.events.payloads import TrainingProgress


@dataclass
class ProgressThrottle:
    interval_s: float
    _pending: dict[str, TrainingProgress] = field(default_factory=dict)
    _sent_at: dict[str, float] = field(default_factory=dict)
    dropped: int = 0  # records replaced by a newer one before they were due

    def offer(self, record: TrainingProgress, now: float) -> TrainingProgress | None:
        """The record to publish now, or None when it waits (it may be replaced by a newer one)."""
        job = record.job_id
        old = self._pending.get(job)
        if old is not None:
            self.dropped += 1  # one of the two never goes out
        if old is None or (record.generation, record.step) >= (old.generation, old.step):
            self._pending[job] = record
        return self.due(job, now)

    def due(self, job: str, now: float) -> TrainingProgress | None:
        """The pending record of ``job`` if its interval has passed."""
        if job not in self._pending:
            return None
        last = self._sent_at.get(job)
        if last is not None and now - last < self.interval_s:
            return None
        self._sent_at[job] = now
        return self._pending.pop(job)

    def flush(self, job: str) -> TrainingProgress | None:
        """The pending record of ``job`` whatever the interval (the job ended); forgets the job."""
        self._sent_at.pop(job, None)
        return self._pending.pop(job, None)

    def pending_jobs(self) -> list[str]:
        return list(self._pending)
