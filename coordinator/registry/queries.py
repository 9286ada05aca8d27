"""The registry's answers to other components (``ModelRegistry``), read from its records: a version's weights
and lineage, the champion, a model's retraining template. The records stay here; the answers are copies."""

from __future__ import annotations

from myolo.coordinator.registry.interface import TemplateInfo, VersionInfo
from myolo.coordinator.registry.records import RetrainTemplate, VersionRecord


def version_info(rec: VersionRecord) -> VersionInfo:
    return VersionInfo(
        model=rec.model,
        version=rec.version,
        artifact=rec.artifact,
        sha256=rec.sha256,
        parent=rec.parent,
        quantization=rec.quantization,
    )


def template_info(template: RetrainTemplate) -> TemplateInfo:
    return TemplateInfo(
        manifest=template.manifest,
        artifact_dir=template.artifact_dir,
        from_champion=template.from_champion,
        cooldown_s=template.cooldown_s,
    )
