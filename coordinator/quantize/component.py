"""The quantize component: a registered version in, its quantized child registered with its lineage out.

``POST /v1/models/{model}/versions/{version}/quantize`` records a run (``myolo.state.quantize``), then submits
its one-replica job (``plan.py``); every tick the leader follows the running runs: once the job succeeded, the
export its rank 0 wrote (carried by the completion event) is registered as a new version of the model whose
parent is the source, with the quantization and both held-out evaluations. The registry decides whether it
becomes champion (``quantize_margin``). A run is written first and swapped in memory after; every coordinator
follows the state topic and collects completions, so a new leader carries on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import structlog
from msgspec.structs import replace

from myolo.coordinator.core.component import Component, RouteSet, StateTopic
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.errors import NotLeader
from myolo.coordinator.jobs.interface import JobConflict, JobsAPI, ManifestError
from myolo.coordinator.quantize import plan, routes
from myolo.coordinator.quantize.config import QuantizeConfig
from myolo.coordinator.quantize.interface import QuantizeRefused
from myolo.coordinator.quantize.records import STATE_QUANTIZE, QuantizeRequest, QuantizeRun, run_key
from myolo.coordinator.registry.interface import ModelRegistry, NewVersion, RegistryError, UnknownModel, UnknownVersion
from myolo.events.bus import RecordInfo
from myolo.events.envelope import Event
from myolo.events.payloads import TrainingCompleted
from myolo.events.payloads.models import ModelExport

log = structlog.get_logger("myolo.coordinator.quantize")
BY = "quantize"


class Quantize(Component):
    name = "quantize"
    requires = (ModelRegistry, JobsAPI)
    config = QuantizeConfig
    openapi = Path(__file__).with_name("openapi.yaml")
    consumes = (TrainingCompleted,)
    owns = (
        StateTopic(
            STATE_QUANTIZE,
            {"run": QuantizeRun},
            partitions=1,
            key="run/<job>",
            description="coordinator state: quantization runs (their jobs and the versions they became)",
        ),
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.cfg: QuantizeConfig = ctx.config
        self.registry = ctx.need(ModelRegistry)
        self.jobs = ctx.need(JobsAPI)
        self.by_name: dict[str, QuantizeRun] = {}
        self.heard: dict[str, tuple[int, ModelExport]] = {}  # job -> (generation, export), from completions
        self.counters = {"submitted": 0, "registered": 0, "failed": 0}

    # ---- Quantizations ----------------------------------------------------------------------------------
    def runs(self) -> tuple[QuantizeRun, ...]:
        return tuple(sorted(self.by_name.values(), key=lambda r: (-r.submitted, r.name)))

    def run(self, name: str) -> QuantizeRun | None:
        return self.by_name.get(name)

    async def quantize(self, model: str, version: int, request: QuantizeRequest, by: str) -> tuple[QuantizeRun, bool]:
        self.ctx.leadership.require()
        if not self.cfg.artifact_dir:
            raise QuantizeRefused(
                "this coordinator has nowhere to write quantized models",
                field="quantize.artifact_dir",
                hint="set [quantize] artifact_dir in coordinator.toml to shared storage every node can write",
            )
        if not self.registry.has_model(model):
            raise UnknownModel(model)
        source = self.registry.version_info(model, version)
        if source is None:
            raise UnknownVersion(model, version)
        if source.quantization is not None:
            raise QuantizeRefused(
                f"version {version} of {model} is quantized already ({source.quantization.scheme}, "
                f"{source.quantization.bits} bits)",
                field="version",
                hint=f"quantize its parent, version {source.parent}" if source.parent else "quantize a float version",
            )
        if request.scheme == "gptq" and request.calib is None:
            raise QuantizeRefused("gptq needs calibration data", field="calib", hint="give --calib FILE")
        if request.calib is not None and request.calib == request.eval:
            raise QuantizeRefused(
                "calib and eval are the same file: the evaluation must be on held-out tokens",
                field="eval",
                hint="cut the calibration and evaluation sets from different parts of the data",
            )
        name = plan.job_name(model, version, request)
        existing = self.by_name.get(name)
        if existing is not None and existing.state != "failed":
            return existing, False
        if existing is None and len(self.by_name) >= self.cfg.max_runs:
            raise QuantizeRefused(
                f"{len(self.by_name)} quantization runs are kept (quantize.max_runs)", field="quantize.max_runs"
            )
        try:
            path = plan.source_path(source.artifact, version)
        except ValueError as exc:
            raise QuantizeRefused(str(exc), field="version") from None
        run = QuantizeRun(
            name=name,
            model=model,
            version=version,
            request=request,
            source_artifact=path,
            source_sha256=source.sha256,
            export_path=plan.export_path(self.cfg, name),
            submitted=self.ctx.clock.now(),
            by=by,
        )
        await self._save(run)  # written before the job exists: a new leader knows what it is for
        try:
            await self.jobs.submit(plan.manifest(self.cfg, name, request, path, source.sha256), f"{BY}:{by}")
        except NotLeader:
            raise
        except (ManifestError, JobConflict, ValueError) as exc:
            await self._save(replace(run, state="failed", reason=f"not submitted: {exc}"))
            self.counters["failed"] += 1
            raise QuantizeRefused(f"the quantization job was refused: {exc}", field="request") from None
        self.counters["submitted"] += 1
        log.info("quantization submitted", model=model, version=version, job=name, scheme=request.scheme, by=by)
        return run, True

    # ---- hooks ------------------------------------------------------------------------------------------
    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        if isinstance(record, QuantizeRun):
            self.by_name[record.name] = record

    async def on_event(self, event: Event, info: RecordInfo) -> None:
        done = event.data
        if isinstance(done, TrainingCompleted) and done.export is not None and done.job_id in self.by_name:
            self.heard[done.job_id] = (done.generation, done.export)

    async def tick(self, now: float) -> None:
        if not self.ctx.leadership.is_leader:
            return
        for run in [r for r in self.by_name.values() if r.state == "running"]:
            await self._follow(run, now)

    async def _follow(self, run: QuantizeRun, now: float) -> None:
        job = self.jobs.outcome(run.name)
        if job is None and self.jobs.applying(run.name):
            return  # submitted a moment ago: the job's record is being written
        if job is None:
            await self._end(replace(run, state="failed", reason="its job was deleted"))
            return
        if job.failed:
            await self._end(replace(run, state="failed", reason=f"job failed: {job.reason}"))
            return
        if not job.succeeded:
            return
        heard = self.heard.get(run.name)
        if heard is None:
            if now - job.updated > self.cfg.export_wait_s:
                await self._end(
                    replace(run, state="failed", reason="the job succeeded but no node reported its export")
                )
            return
        generation, export = heard
        if export.quantization is None:
            await self._end(replace(run, state="failed", reason="the job's export is not a quantized model"))
            return
        new = NewVersion.from_export(export, job=run.name, generation=generation, parent=run.version)
        scheme = export.quantization
        tags = {"quantized": f"{scheme.scheme}-{scheme.bits}bit-g{scheme.group_size}"}
        try:
            version = await self.registry.add_version(run.model, replace(new, tags=tags), f"{BY}:{run.by}")
        except RegistryError as exc:
            await self._end(replace(run, state="failed", reason=f"not registered: {exc}"))
            return
        await self._end(
            replace(run, state="registered", generation=generation, export=export, registered=version.version)
        )
        log.info("quantized version registered", model=run.model, version=version.version, parent=run.version)

    async def _end(self, run: QuantizeRun) -> None:
        await self._save(run)
        self.counters["registered" if run.state == "registered" else "failed"] += 1
        self.heard.pop(run.name, None)

    async def _save(self, run: QuantizeRun) -> None:
        await self.ctx.store.put(STATE_QUANTIZE, run_key(run.name), run)
        self.by_name[run.name] = run

    # ---- API and status ---------------------------------------------------------------------------------
    def api(self) -> RouteSet:
        return RouteSet(routes.routes(self), self.openapi)

    def stats(self) -> dict[str, int]:
        return {f"quantize_{k}": v for k, v in self.counters.items()}

    def status(self) -> dict[str, Any]:
        return {"quantize_running": [r.name for r in self.by_name.values() if r.state == "running"]}
