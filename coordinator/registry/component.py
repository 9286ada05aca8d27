"""The registry component: models, versions and aliases in ``myolo.state.registry``; their events on
``myolo.models``.

Every coordinator follows the state topic (``on_state``), so a standby's reads are current; only the leader
writes. Each write is recorded in the state topic before its event is sent: ``ModelRegistered`` once a version
is recorded, ``ModelAliasSet`` once an alias's move is. A version whose events did not all go out (the broker
failed halfway) stays ``announced`` False: the leader finishes it on a retried registration or its next tick.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import structlog

from myolo.coordinator.core.component import Component, RouteSet, StateTopic
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.dashboard import Dashboard, Panel
from myolo.coordinator.registry import checks, dashboard, evals, queries, routes, series
from myolo.coordinator.registry.config import RegistryConfig
from myolo.coordinator.registry.errors import RegistryError, RegistryFull, UnknownAlias, UnknownModel, UnknownVersion
from myolo.coordinator.registry.interface import ModelRegistry, NewVersion, TemplateInfo, VersionInfo
from myolo.coordinator.registry.records import (
    CHALLENGER,
    CHAMPION,
    HISTORY_MAX,
    KINDS,
    STATE_REGISTRY,
    AliasChange,
    AliasRecord,
    ModelRecord,
    Record,
    RetrainTemplate,
    VersionRecord,
    key_of,
)
from myolo.coordinator.registry.view import RegistryView
from myolo.events.payloads import ModelAliasSet, ModelRegistered

log = structlog.get_logger("myolo.coordinator.registry")
AUTO = "auto"
RESERVED = (CHAMPION, CHALLENGER)  # set by the registry itself; never counted against max_aliases_per_model
ANNOUNCE_PER_TICK = 16


class Registry(Component):
    name = "registry"
    provides = (ModelRegistry,)
    config = RegistryConfig
    openapi = Path(__file__).with_name("openapi.yaml")
    owns = (
        StateTopic(
            STATE_REGISTRY,
            KINDS,
            partitions=3,
            key="model:version or model@alias",
            description="coordinator state: model registry (models, versions, aliases with their history)",
        ),
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.cfg: RegistryConfig = ctx.config
        self.view = RegistryView()
        self._lock = asyncio.Lock()
        self.registered_count = 0
        self.promoted = 0

    # ---- RegistryRoutes: reads --------------------------------------------------------------------------------
    def model(self, name: str) -> ModelRecord | None:
        return self.view.model(name)

    def models(self) -> tuple[ModelRecord, ...]:
        return tuple(self.view.all_models())

    def versions(self, name: str) -> tuple[VersionRecord, ...]:
        return tuple(self.view.versions_of(name))

    def version(self, name: str, n: int) -> VersionRecord | None:
        return self.view.version(name, n)

    def alias(self, name: str, alias: str) -> AliasRecord | None:
        return self.view.alias(name, alias)

    def aliases(self, name: str) -> tuple[AliasRecord, ...]:
        return tuple(self.view.aliases_of(name))

    def champion(self, name: str) -> VersionRecord | None:
        return self.view.champion(name)

    def lineage(self, name: str, n: int) -> tuple[VersionRecord, ...]:
        return tuple(self.view.lineage(name, n))

    # ---- ModelRegistry: the other components' questions, answered in copies ------------------------------
    def has_model(self, name: str) -> bool:
        return self.model(name) is not None

    def version_info(self, name: str, n: int) -> VersionInfo | None:
        rec = self.version(name, n)
        return None if rec is None else queries.version_info(rec)

    def champion_info(self, name: str) -> VersionInfo | None:
        rec = self.champion(name)
        return None if rec is None else queries.version_info(rec)

    def retrain_template(self, name: str) -> TemplateInfo | None:
        entry = self.model(name)
        return None if entry is None or entry.retrain is None else queries.template_info(entry.retrain)

    async def add_version(self, model: str, new: NewVersion, by: str) -> VersionInfo:
        return queries.version_info(await self.register(model, new, by))

    def registered(self, model: str, new: NewVersion) -> VersionRecord | None:
        n = self.view.registered(model, new.job, new.generation, new.artifact, new.sha256)
        return self.view.version(model, n) if n is not None else None

    # ---- RegistryRoutes: writes -----------------------------------------------------------------------------
    async def register(self, model: str, new: NewVersion, by: str) -> VersionRecord:
        self.ctx.leadership.require()
        model = checks.model_name(model)
        new = checks.new_version(new)
        async with self._lock:
            self.ctx.leadership.require()
            existing = self.registered(model, new)
            if existing is not None:
                return existing if existing.announced else await self._announce(existing)
            version = self._new_version(model, new, by)
            current = self.view.model(model)
            now = version.created
            if current is None:
                record = ModelRecord(name=model, created=now, updated=now, by=by, latest_version=version.version)
            else:
                record = msgspec.structs.replace(current, updated=now, latest_version=version.version)
            await self._put(record)  # the model first: a version is never without its model
            await self._put(version)
            self.registered_count += 1
            log.info("model version registered", model=model, version=version.version, by=by, job=new.job)
            return await self._announce(version)

    def _new_version(self, model: str, new: NewVersion, by: str) -> VersionRecord:
        if self.view.model(model) is None and len(self.view.models) >= self.cfg.max_models:
            raise RegistryFull("model", f"the registry holds {self.cfg.max_models} models (registry.max_models)")
        held = len(self.view.versions.get(model, {}))
        if held >= self.cfg.max_versions_per_model:
            raise RegistryFull(
                "model",
                f"model {model} has {held} versions, the most one model may have (registry.max_versions_per_model)",
            )
        if new.parent is not None and self.view.version(model, new.parent) is None:
            raise UnknownVersion(model, new.parent, field="parent")
        version = VersionRecord(
            model=model,
            version=self.view.latest(model) + 1,
            created=self.ctx.clock.now(),
            by=by,
            source="job" if new.job is not None else "external",
            artifact=new.artifact,
            sha256=new.sha256,
            size_bytes=new.size_bytes,
            steps=new.steps,
            job=new.job,
            generation=new.generation,
            data_sha256=new.data_sha256,
            model_index=evals.model_index(model, new.eval),
            metrics=evals.all_metrics(new.metrics, new.eval),
            parent=new.parent,
            drift_event=new.drift_event,
            tags=dict(new.tags),
            description=new.description,
            quantization=new.quantization,
            watermark=new.watermark,
        )
        decision = self._promotion(version)
        return msgspec.structs.replace(version, auto_promotion=decision.reason if decision else None)

    def _promotion(self, version: VersionRecord) -> evals.Promotion | None:
        model = self.view.model(version.model)
        champion = self.view.champion(version.model)
        if version.quantization is not None:
            parent = self.view.version(version.model, version.parent) if version.parent is not None else None
            return evals.decide_quantized(version, parent, champion, model.quantize_margin if model else None)
        return evals.decide(version, champion, model.promote_margin if model else None)

    async def _announce(self, version: VersionRecord) -> VersionRecord:
        """The registration's event, the challenger alias and an auto-promotion; then ``announced``. Each step
        is safe to repeat: a retry after a broker failure finishes what is missing."""
        model, n = version.model, version.version
        await self.ctx.producer.send(
            ModelRegistered(
                model=model,
                version=n,
                artifact=version.artifact,
                sha256=version.sha256,
                job=version.job,
                generation=version.generation,
                parent=version.parent,
                drift_event=version.drift_event,
                metrics=version.metrics,
                by=version.by,
                watermark=version.watermark,
            )
        )
        challenger = self.view.alias(model, CHALLENGER)
        if challenger is None or challenger.version is None or challenger.version < n:
            await self._move(model, CHALLENGER, n, AUTO, f"version {n} registered ({_origin(version)})")
        decision = self._promotion(version)
        champion = self.view.champion(model)
        latest = self.view.latest(model) == n  # a newer version had its own chance: an old one is not promoted
        if decision is not None and decision.promote and latest and (champion is None or champion.version != n):
            await self._move(model, CHAMPION, n, AUTO, decision.reason)
            self.promoted += 1
            log.info("model version auto-promoted", model=model, version=n, reason=decision.reason)
        done = msgspec.structs.replace(version, announced=True)
        await self._put(done)
        return done

    async def set_alias(self, model: str, alias: str, version: int | None, by: str, reason: str) -> AliasRecord:
        self.ctx.leadership.require()
        model, alias = checks.model_name(model), checks.alias_name(alias)
        why = checks.reason(reason)
        if version is not None and version < 1:
            raise RegistryError("version", f"{version} is not a version number: versions count from 1")
        async with self._lock:
            self.ctx.leadership.require()
            if self.view.model(model) is None:
                raise UnknownModel(model)
            current = self.view.alias(model, alias)
            if version is None:
                if current is None:
                    raise UnknownAlias(model, alias)
                if current.version is None:
                    return current
            else:
                if self.view.version(model, version) is None:
                    raise UnknownVersion(model, version)
                if current is not None and current.version == version:
                    return current
                if current is None and alias not in RESERVED:
                    others = sum(1 for a in self.view.aliases.get(model, {}) if a not in RESERVED)
                    if others >= self.cfg.max_aliases_per_model:
                        raise RegistryFull(
                            "alias",
                            f"model {model} has {others} aliases besides champion and challenger "
                            "(registry.max_aliases_per_model); reuse or remove one",
                        )
            record = await self._move(model, alias, version, by, why)
            log.info("model alias set", model=model, alias=alias, version=version, by=by, reason=why)
            return record

    async def _move(self, model: str, alias: str, version: int | None, by: str, reason: str) -> AliasRecord:
        """Point the alias, recording the move in its history (the newest HISTORY_MAX kept), then say so."""
        current = self.view.alias(model, alias) or AliasRecord(model=model, alias=alias)
        change = AliasChange(version=version, previous=current.version, by=by, when=self.ctx.clock.now(), reason=reason)
        history = [*current.history, change]
        dropped = max(0, len(history) - HISTORY_MAX)
        record = AliasRecord(
            model=model,
            alias=alias,
            version=version,
            history=history[dropped:],
            dropped=current.dropped + dropped,
        )
        await self._put(record)
        await self.ctx.producer.send(
            ModelAliasSet(model=model, alias=alias, version=version, previous=current.version, by=by, reason=reason)
        )
        return record

    async def put_model(
        self,
        name: str,
        description: str,
        retrain: RetrainTemplate | None,
        promote_margin: float | None,
        by: str,
        *,
        quantize_margin: float | None = None,
    ) -> ModelRecord:
        self.ctx.leadership.require()
        name = checks.model_name(name)
        if len(description) > 2000:
            raise RegistryError("description", f"{len(description)} characters; at most 2000")
        template = checks.template(retrain) if retrain is not None else None
        margin = checks.margin(promote_margin)
        qmargin = checks.margin(quantize_margin, "quantize_margin")
        async with self._lock:
            self.ctx.leadership.require()
            current = self.view.model(name)
            now = self.ctx.clock.now()
            if current is None:
                if len(self.view.models) >= self.cfg.max_models:
                    raise RegistryFull(
                        "model", f"the registry holds {self.cfg.max_models} models (registry.max_models)"
                    )
                record = ModelRecord(
                    name=name,
                    description=description,
                    created=now,
                    updated=now,
                    by=by,
                    retrain=template,
                    promote_margin=margin,
                    quantize_margin=qmargin,
                    latest_version=self.view.latest(name),
                )
            else:
                settings = (current.description, current.retrain, current.promote_margin, current.quantize_margin)
                if settings == (description, template, margin, qmargin):
                    return current
                record = msgspec.structs.replace(
                    current,
                    description=description,
                    retrain=template,
                    promote_margin=margin,
                    quantize_margin=qmargin,
                    updated=now,
                    by=by,
                )
            await self._put(record)
            log.info(
                "model " + ("created" if current is None else "updated"),
                model=name,
                by=by,
                retrain=template is not None,
                promote_margin=margin,
            )
            return record

    async def _put(self, record: Record) -> None:
        await self.ctx.store.put(STATE_REGISTRY, key_of(record), record)
        self.view.apply(record)

    # ---- hooks ----------------------------------------------------------------------------------------------
    def on_state(self, topic: str, key: str, record: msgspec.Struct | None, kind: str) -> None:
        if self.ctx.leadership.is_leader:
            return  # memory is ahead of the log: we wrote it
        if record is None:
            self.view.forget(key, kind)
        else:
            self.view.apply(record)

    async def tick(self, now: float) -> None:
        """The leader finishes registrations whose events did not all go out (a few per tick)."""
        if not self.ctx.leadership.is_leader or not self.view.unannounced:
            return
        for model, n in sorted(self.view.unannounced)[:ANNOUNCE_PER_TICK]:
            async with self._lock:
                version = self.view.version(model, n)
                if version is None or version.announced or not self.ctx.leadership.is_leader:
                    continue
                try:
                    await self._announce(version)
                except Exception as exc:  # the broker is still away: the next tick tries again
                    log.warning("registration not announced yet", model=model, version=n, error=repr(exc))
                    return

    def api(self) -> RouteSet:
        return RouteSet(routes.routes(self), self.openapi)

    def metrics(self) -> dict[str, Any]:
        return series.series(self.view)

    def dashboard(self) -> Dashboard:
        return Dashboard(
            panels=(Panel("registry", "Registry", lambda _: dashboard.board(self.view)),),
            timeline=lambda: dashboard.moments(self.view),
        )

    def stats(self) -> dict[str, int]:
        return {
            "registry_models": len(self.view.models),
            "registry_versions": self.view.count(),
            "registry_registered": self.registered_count,
            "registry_auto_promoted": self.promoted,
        }

    def status(self) -> dict[str, Any]:
        return {
            "registry": [
                {
                    "model": m.name,
                    "latest_version": m.latest_version,
                    "aliases": {a.alias: a.version for a in self.view.aliases_of(m.name) if a.version is not None},
                }
                for m in self.view.all_models()
            ]
        }


def _origin(version: VersionRecord) -> str:
    if version.job is not None:
        return f"job {version.job} generation {version.generation}"
    return f"external, by {version.by}"
