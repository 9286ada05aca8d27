"""The drift component: watches production traffic per model version and retrains the model when it drifts.

Every coordinator reads ``myolo.drift.samples`` and keeps the same monitors (same windows, same seeds), so a
new leader judges drift from the traffic it already saw. Only the leader writes: the references it learned,
each evaluation (``status/``), and publishes ``ai.myolo.drift.detected.v1`` on a detection, after the
retraining controller (:mod:`myolo.coordinator.drift.retrainer`) recorded and submitted the retraining job it
causes, and registered what it exports.

Which traffic is watched: a version with references (set from a file), or the model's champion (or any
version of a model without one) — those learn their references from their first samples. Samples of other
versions are counted and dropped.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import structlog

from myolo.coordinator.core.component import Component, RouteSet, StateTopic
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.dashboard import Dashboard, Panel
from myolo.coordinator.core.errors import Invalid
from myolo.coordinator.drift import routes, series
from myolo.coordinator.drift.answers import DriftView, LearningInfo, ReferenceInfo
from myolo.coordinator.drift.config import DriftConfig
from myolo.coordinator.drift.dashboard import DriftHistory
from myolo.coordinator.drift.monitor import Monitor
from myolo.coordinator.drift.records import (
    MAX_DETECTIONS,
    STATE_DRIFT,
    ReferenceRecord,
    RetrainRun,
    RuleRecord,
    StatusRecord,
    reference_key,
    rule_key,
    status_key,
)
from myolo.coordinator.drift.reference import Reference
from myolo.coordinator.drift.retrainer import Retrainer
from myolo.coordinator.drift.rule import DriftRule, Evaluation
from myolo.coordinator.jobs.interface import JobsAPI
from myolo.coordinator.registry.interface import ModelRegistry
from myolo.events.bus import RecordInfo
from myolo.events.envelope import Event
from myolo.events.payloads import DriftDetected, DriftSample, TrainingCompleted

log = structlog.get_logger("myolo.coordinator.drift")
Key = tuple[str, str]  # (model, version)


class Drift(Component):
    name = "drift"
    requires = (
        ModelRegistry,
        JobsAPI,
    )
    config = DriftConfig
    openapi = Path(__file__).with_name("openapi.yaml")
    consumes = (DriftSample, TrainingCompleted)
    owns = (
        StateTopic(
            STATE_DRIFT,
            {"reference": ReferenceRecord, "rule": RuleRecord, "status": StatusRecord, "retrain": RetrainRun},
            partitions=3,
            key="model",
            description="coordinator state: drift references, rules and latest statistics",
        ),
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.cfg: DriftConfig = ctx.config
        self.registry = ctx.need(ModelRegistry)
        self.jobs = ctx.need(JobsAPI)
        self.references: dict[Key, dict[str, ReferenceRecord]] = {}
        self.rules: dict[str, RuleRecord] = {}
        self.statuses: dict[Key, StatusRecord] = {}
        self.monitors: dict[Key, Monitor] = {}
        self.history = DriftHistory()  # recent evaluations per model version, for the dashboard
        self.retrainer = Retrainer(self.cfg, ctx.store, self.registry, self.jobs)
        self._stored: dict[Key, set[str]] = {}  # learned features already written
        self.by_model: Counter[tuple[str, str]] = Counter()  # (evaluations | detections, model), GET /metrics
        self.counters: dict[str, int] = {
            "samples": 0,
            "unwatched": 0,
            "dropped": 0,
            "refused_features": 0,
            "evaluations": 0,
            "detections": 0,
        }

    # ---- DriftAPI (api.py) ---------------------------------------------------------------------------------------
    def summary(self) -> tuple[StatusRecord, ...]:
        return tuple(self.statuses[k] for k in sorted(self.statuses))

    def view(self, model: str) -> DriftView:
        versions = [s for (m, _), s in sorted(self.statuses.items()) if m == model]
        refs = [
            ReferenceInfo(
                version=r.version,
                feature=r.feature,
                kind="numeric" if r.numeric is not None else "categorical",
                count=ref.count if (ref := r.reference) is not None else 0,
                source=r.source,
                created=r.created,
                by=r.by,
            )
            for (m, _), feats in sorted(self.references.items())
            if m == model
            for _, r in sorted(feats.items())
        ]
        learning = [
            LearningInfo(version=v, features=mon.learning, target=mon.rule.reference_count)
            for (m, v), mon in sorted(self.monitors.items())
            if m == model and mon.learning
        ]
        run = self.retrainer.runs.get(model)
        own = self.rules.get(model)
        return DriftView(
            model=model,
            rule=self.rule(model),
            rule_source="model" if own else "default",
            versions=versions,
            references=refs,
            learning=learning,
            retrain=run,
        )

    def rule(self, model: str) -> DriftRule:
        own = self.rules.get(model)
        return own.rule if own else self.cfg.rule

    async def set_reference(
        self, model: str, version: str | None, feature: str, reference: Reference, source: str, by: str
    ) -> ReferenceRecord:
        self.ctx.leadership.require()
        if version is None:
            champion = self.registry.champion_info(model)
            if champion is None:
                raise Invalid(
                    f"model {model!r} has no champion in the registry; give the version",
                    field="version",
                    hint="or set the model's champion alias first: myoloctl registry alias set",
                )
            version = str(champion.version)
        key = (model, version)
        if key not in self.references and len({m for m, _ in self.references}) >= self.cfg.max_models:
            raise Invalid(
                f"references are kept for {self.cfg.max_models} models (drift.max_models)",
                field="model",
                hint="raise drift.max_models in coordinator.toml, or set references for a model already watched",
            )
        rec = ReferenceRecord.of(model, version, feature, reference, source=source, created=self.ctx.clock.now(), by=by)
        await self.ctx.store.put(STATE_DRIFT, reference_key(model, version, feature), rec)
        self._apply_reference(rec)
        log.info("drift reference set", model=model, version=version, feature=feature, source=source, by=by)
        return rec

    async def set_rule(self, model: str, rule: DriftRule | None, by: str) -> RuleRecord | None:
        self.ctx.leadership.require()
        if rule is None:
            if model in self.rules:
                await self.ctx.store.delete(STATE_DRIFT, rule_key(model), "rule")
                self._apply_rule(model, None)
            return None
        rec = RuleRecord(model=model, rule=rule, by=by, updated=self.ctx.clock.now())
        await self.ctx.store.put(STATE_DRIFT, rule_key(model), rec)
        self._apply_rule(model, rec)
        log.info("drift rule set", model=model, by=by)
        return rec

    # ---- state ------------------------------------------------------------------------------------------
    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        if isinstance(record, ReferenceRecord):
            self._apply_reference(record)
        elif isinstance(record, RuleRecord):
            self._apply_rule(record.model, record)
        elif kind == "rule" and record is None:
            self._apply_rule(key.removeprefix("rule/"), None)
        elif isinstance(record, StatusRecord):
            self.statuses[(record.model, record.version)] = record
            self.history.add(record)
        elif isinstance(record, RetrainRun):
            self.retrainer.apply_state(record)

    def _apply_reference(self, rec: ReferenceRecord) -> None:
        key = (rec.model, rec.version)
        feats = self.references.setdefault(key, {})
        known = feats.get(rec.feature)
        feats[rec.feature] = rec
        if rec.source == "learned":
            self._stored.setdefault(key, set()).add(rec.feature)
            if known is None and key in self.monitors and rec.feature not in self.monitors[key].references:
                self.monitors.pop(key)  # another coordinator learned first: judge against the stored reference
        elif key in self.monitors:
            self.monitors.pop(key)  # a new reference starts a fresh window (the old one judged another baseline)

    def _apply_rule(self, model: str, rec: RuleRecord | None) -> None:
        if rec is None:
            self.rules.pop(model, None)
        else:
            self.rules[model] = rec
        for key in [k for k in self.monitors if k[0] == model]:
            self.monitors.pop(key)  # windows and buckets follow the rule: start them again

    # ---- events -----------------------------------------------------------------------------------------
    async def on_event(self, event: Event, info: RecordInfo) -> None:
        if isinstance(event.data, DriftSample):
            self._observe(event.data)
        elif isinstance(event.data, TrainingCompleted) and event.data.export is not None:
            await self.retrainer.completed(event.data, self.ctx.leadership.is_leader)

    def _observe(self, sample: DriftSample) -> None:
        self.counters["samples"] += 1
        version = sample.version or self._champion(sample.model)
        if version is None:
            self.counters["unwatched"] += 1
            return
        monitor = self._monitor(sample.model, version)
        if monitor is None:
            return
        if sample.version is None:
            sample = msgspec.structs.replace(sample, version=version)
        observed = monitor.observe(sample, self.ctx.clock.now())
        if observed.refused:
            self.counters["refused_features"] += len(observed.refused)
            log.warning("drift sample features refused", model=sample.model, version=version, **observed.refused)

    def _champion(self, model: str) -> str | None:
        champion = self.registry.champion_info(model)
        return str(champion.version) if champion else None

    def _monitor(self, model: str, version: str) -> Monitor | None:
        key = (model, version)
        monitor = self.monitors.get(key)
        if monitor is not None:
            return monitor
        refs = self.references.get(key, {})
        if not refs and self._champion(model) not in (None, version):
            self.counters["unwatched"] += 1  # neither referenced nor the champion: nothing to judge it by
            return None
        if len({m for m, _ in self.monitors} | {model}) > self.cfg.max_models or (
            sum(1 for m, _ in self.monitors if m == model) >= self.cfg.max_versions
        ):
            self.counters["dropped"] += 1
            log.warning("drift sample dropped: too many models or versions watched", model=model, version=version)
            return None
        monitor = Monitor(
            model,
            version,
            self.rule(model),
            references={f: ref for f, r in refs.items() if (ref := r.reference) is not None},
            seed=zlib.crc32(f"{model}/{version}".encode()),
        )
        self.monitors[key] = monitor
        return monitor

    # ---- tick -------------------------------------------------------------------------------------------
    async def tick(self, now: float) -> None:
        leading = self.ctx.leadership.is_leader
        for key, monitor in list(self.monitors.items()):
            if leading:
                await self._store_learned(key, monitor, now)
            result = monitor.evaluate(now)
            if result is None:
                continue
            self.counters["evaluations"] += 1
            self.by_model[("evaluations", key[0])] += 1
            if leading:
                await self._evaluated(key, monitor, result, now)
        if leading:
            await self.retrainer.tick(now)

    async def _store_learned(self, key: Key, monitor: Monitor, now: float) -> None:
        done = self._stored.setdefault(key, set())
        for feature, ref in monitor.references.items():
            if feature in done or feature in self.references.get(key, {}):
                continue
            rec = ReferenceRecord.of(key[0], key[1], feature, ref, source="learned", created=now)
            await self.ctx.store.put(STATE_DRIFT, reference_key(key[0], key[1], feature), rec)
            self.references.setdefault(key, {})[feature] = rec
            done.add(feature)
            log.info("drift reference learned", model=key[0], version=key[1], feature=feature)

    async def _evaluated(self, key: Key, monitor: Monitor, result: Evaluation, now: float) -> None:
        model, version = key
        old = self.statuses.get(key)
        detections = list(old.detections) if old else []
        detection_id = None
        if result.detected:
            detection_id = "drift-" + hashlib.sha256(f"{model}|{version}|{now:.3f}".encode()).hexdigest()[:20]
            detections = [*detections, detection_id][-MAX_DETECTIONS:]
        status = StatusRecord(
            model=model,
            version=version,
            evaluated_at=now,
            window_start=result.window_start if result.window_start is not None else now,
            window_end=now,
            share=result.share,
            drifted=result.drifted,
            consecutive=result.consecutive,
            features=result.features,
            missing=result.missing,
            detections=detections,
        )
        await self.ctx.store.put(STATE_DRIFT, status_key(model, version), status)
        self.statuses[key] = status
        if detection_id is None:
            return
        self.counters["detections"] += 1
        self.by_model[("detections", model)] += 1
        job = await self.retrainer.detected(model, version, detection_id, now)
        rule = monitor.rule
        await self.ctx.producer.send(
            DriftDetected(
                detection_id=detection_id,
                model=model,
                version=version,
                window_start=status.window_start,
                window_end=now,
                windows=result.consecutive,
                drifted_share=result.share,
                share_threshold=rule.share_threshold,
                features=[f for f in result.features if f.drifted] or result.features,
                retraining_job=job,
            )
        )
        log.warning(
            "drift detected",
            model=model,
            version=version,
            detection=detection_id,
            share=round(result.share, 3),
            features=[f.feature for f in result.features if f.drifted],
            retraining_job=job,
        )

    # ---- API, stats -------------------------------------------------------------------------------------
    def api(self) -> RouteSet:
        return RouteSet(routes.routes(self), self.openapi, health=lambda: {"drift_monitors": len(self.monitors)})

    def stats(self) -> dict[str, int]:
        retrained = {"retrainings": self.retrainer.submitted, "registered": self.retrainer.registered}
        return {**self.counters, **retrained, "monitors": len(self.monitors)}

    def metrics(self) -> dict[str, Any]:
        return series.series(self.by_model, {m for m, _ in self.monitors})

    def dashboard(self) -> Dashboard:
        return Dashboard(
            panels=(Panel("drift", "Drift", lambda _: self.history.board()),), timeline=self.history.moments
        )

    def status(self) -> dict[str, Any]:
        return {"drift": [msgspec.to_builtins(s) for s in self.summary()]}
