"""The retraining controller: a drift detection in, a registered model version out.

Apart from monitoring (which judges traffic and records each evaluation), this follows each model's newest
retraining run (``retrain/<model>`` in ``myolo.state.drift``): on a detection it writes the run *before* it
submits the job; each tick of the leader it looks at the job, and once it succeeded registers the version its
rank 0 exported (carried by its completion event) with its lineage: the champion it started from and the
drift event that caused it. A run is written first and swapped in memory after, so a new leader follows the
same runs from the state topic.
"""

from __future__ import annotations

import structlog
from msgspec.structs import replace

from myolo.coordinator.core.errors import NotLeader
from myolo.coordinator.drift import retrain
from myolo.coordinator.drift.config import DriftConfig
from myolo.coordinator.drift.records import STATE_DRIFT, RetrainRun, retrain_key
from myolo.coordinator.jobs.interface import JobConflict, JobsAPI, ManifestError
from myolo.coordinator.registry.interface import ModelRegistry, NewVersion, RegistryError
from myolo.coordinator.state import StateStore
from myolo.events.payloads import TrainingCompleted
from myolo.events.payloads.models import ModelExport

log = structlog.get_logger("myolo.coordinator.drift")
EXPORT_WAIT_S = 300.0  # a succeeded job whose export has not been heard of after this long failed to export


class Retrainer:
    """Each model's newest retraining run, by model; ``exports`` are what completions carried, by job."""

    def __init__(self, cfg: DriftConfig, store: StateStore, registry: ModelRegistry, jobs: JobsAPI) -> None:
        self.cfg = cfg
        self.runs: dict[str, RetrainRun] = {}
        self.exports: dict[str, tuple[int, ModelExport]] = {}  # job -> (generation, export), from completions
        self.submitted = 0
        self.registered = 0
        self._store = store
        self._registry = registry
        self._jobs = jobs

    def apply_state(self, run: RetrainRun) -> None:
        self.runs[run.model] = run

    async def detected(self, model: str, version: str, detection_id: str, now: float) -> str | None:
        """Submit the model's retraining job for this detection (written first), or say in the log why not.
        Returns the job's name when one was submitted."""
        template = self._registry.retrain_template(model)
        last = self.runs.get(model)
        why = None
        if not self.cfg.retrain:
            why = "retraining is off (drift.retrain = false)"
        elif template is None:
            why = f"model {model} has no retraining template (myoloctl registry model set {model} --retrain ...)"
        elif last is not None and last.state == "running":
            why = f"retraining job {last.job} still runs"
        elif last is not None and now < last.submitted + template.cooldown_s:
            why = f"in cooldown until {last.submitted + template.cooldown_s:.0f} (retrain.cooldown_s)"
        if why is not None or template is None:
            log.info("no retraining for this drift", model=model, detection=detection_id, reason=why)
            return None
        champion = self._registry.champion_info(model)
        job = retrain.job_name(model, detection_id)
        run = RetrainRun(
            model=model,
            job=job,
            detection_id=detection_id,
            version=version,
            parent=champion.version if champion else None,
            submitted=now,
        )
        await self._save(run)
        try:
            text = retrain.manifest(template, model, job, detection_id, champion if template.from_champion else None)
            await self._jobs.submit(text, f"drift:{detection_id}")
        except NotLeader:
            raise
        except (ManifestError, JobConflict, ValueError) as exc:
            await self._save(replace(run, state="failed", reason=f"not submitted: {exc}"))
            log.error("retraining job refused", model=model, job=job, error=str(exc))
            return None
        self.submitted += 1
        log.info("retraining job submitted", model=model, job=job, detection=detection_id, parent=run.parent)
        return job

    async def completed(self, done: TrainingCompleted, leading: bool) -> None:
        """A completion of a run's job that carries its export: kept by every coordinator, written by the leader."""
        run = next((r for r in self.runs.values() if r.job == done.job_id), None)
        if run is None or done.export is None:
            return
        self.exports[done.job_id] = (done.generation, done.export)
        if leading and run.export is None:
            await self._save(replace(run, export=done.export, generation=done.generation))

    async def tick(self, now: float) -> None:
        """The leader follows every running run."""
        for run in list(self.runs.values()):
            if run.state == "running":
                await self._follow(run, now)

    async def _follow(self, run: RetrainRun, now: float) -> None:
        """A running retraining: register its export once the job succeeded; record why when it did not."""
        job = self._jobs.outcome(run.job)
        if job is None and self._jobs.applying(run.job):
            return  # submitted a moment ago: the job's record is being written
        if job is None:
            await self._save(replace(run, state="failed", reason="the job was deleted"))
            return
        if job.failed:
            await self._save(replace(run, state="failed", reason=f"job failed: {job.reason}"))
            return
        if not job.succeeded:
            return
        heard = self.exports.get(run.job)
        export, generation = run.export, run.generation
        if export is None and heard is not None:
            generation, export = heard
        if export is None:
            if now - job.updated > EXPORT_WAIT_S:
                reason = "the job succeeded but no node reported its export (spec.trainer.checkpoint.exportPath)"
                await self._save(replace(run, state="failed", reason=reason))
            return
        new = NewVersion.from_export(
            export, job=run.job, generation=generation or 0, parent=run.parent, drift_event=run.detection_id
        )
        try:
            version = await self._registry.add_version(run.model, new, f"drift:{run.detection_id}")
        except RegistryError as exc:
            await self._save(replace(run, state="failed", reason=f"not registered: {exc}"))
            return
        self.registered += 1
        await self._save(
            replace(run, state="registered", export=export, generation=generation, registered=version.version)
        )
        log.info("retrained version registered", model=run.model, version=version.version, job=run.job)

    async def _save(self, run: RetrainRun) -> None:
        await self._store.put(STATE_DRIFT, retrain_key(run.model), run)
        self.runs[run.model] = run
