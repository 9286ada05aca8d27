"""CloudEvents ``type`` names and the payload Struct each one carries.

A type name is ``ai.myolo.<subject>.<verb-or-noun>.v<major>``. Consumers accept the majors listed here; a
newer minor version of a payload only adds optional fields, which the Structs tolerate. A known type with an
unknown major is "unsupported version", distinct from an unknown type, so operators can tell a version skew
from garbage.
"""

from __future__ import annotations

import re

from myolo.events.errors import InvalidEvent
from myolo.events.payloads import (
    AuditRecord,
    BandwidthReport,
    Command,
    CommandAck,
    DriftDetected,
    DriftSample,
    LeakReport,
    ModelAliasSet,
    ModelRegistered,
    NcclReport,
    NodeFault,
    NodeSample,
    Payload,
    ReleasePublished,
    RolloutPhaseChanged,
    TrainingCompleted,
    TrainingFault,
    TrainingProgress,
)

# each type name is written here once; the topic catalogue and everything else refer to these
NODE_SAMPLE_V1 = "ai.myolo.node.sample.v1"
NODE_FAULT_V1 = "ai.myolo.node.fault.v1"
NCCL_REPORT_V1 = "ai.myolo.nccl.report.v1"
NCCL_BANDWIDTH_V1 = "ai.myolo.nccl.bandwidth.v1"
MEMORY_LEAK_V1 = "ai.myolo.memory.leak.v1"
TRAINING_PROGRESS_V1 = "ai.myolo.training.progress.v1"
TRAINING_FAULT_V1 = "ai.myolo.training.fault.v1"
TRAINING_COMPLETED_V1 = "ai.myolo.training.completed.v1"
DRIFT_SAMPLE_V1 = "ai.myolo.drift.sample.v1"
RELEASE_PUBLISHED_V1 = "ai.myolo.release.published.v1"
COMMAND_V1 = "ai.myolo.command.v1"
COMMAND_ACK_V1 = "ai.myolo.command.ack.v1"
AUDIT_V1 = "ai.myolo.audit.v1"
DRIFT_DETECTED_V1 = "ai.myolo.drift.detected.v1"
MODEL_REGISTERED_V1 = "ai.myolo.model.registered.v1"
MODEL_ALIAS_V1 = "ai.myolo.model.alias.v1"
ROLLOUT_PHASE_V1 = "ai.myolo.rollout.phase.v1"

PAYLOAD_TYPES: dict[str, type[Payload]] = {
    NODE_SAMPLE_V1: NodeSample,
    NODE_FAULT_V1: NodeFault,
    NCCL_REPORT_V1: NcclReport,
    NCCL_BANDWIDTH_V1: BandwidthReport,
    MEMORY_LEAK_V1: LeakReport,
    TRAINING_PROGRESS_V1: TrainingProgress,
    TRAINING_FAULT_V1: TrainingFault,
    TRAINING_COMPLETED_V1: TrainingCompleted,
    DRIFT_SAMPLE_V1: DriftSample,
    RELEASE_PUBLISHED_V1: ReleasePublished,
    COMMAND_V1: Command,
    COMMAND_ACK_V1: CommandAck,
    AUDIT_V1: AuditRecord,
    DRIFT_DETECTED_V1: DriftDetected,
    MODEL_REGISTERED_V1: ModelRegistered,
    MODEL_ALIAS_V1: ModelAliasSet,
    ROLLOUT_PHASE_V1: RolloutPhaseChanged,
}
TYPE_NAMES: dict[type[Payload], str] = {cls: name for name, cls in PAYLOAD_TYPES.items()}
_VERSIONED = re.compile(r"^(?P<base>.+)\.v(?P<major>\d+)$")
_BASES = {name.rsplit(".v", 1)[0] for name in PAYLOAD_TYPES}


KEY_FIELDS: dict[type[Payload], str] = {
    NodeSample: "node_id",
    NodeFault: "node_id",
    NcclReport: "node_id",
    BandwidthReport: "node_id",
    LeakReport: "node_id",
    TrainingProgress: "job_id",
    TrainingFault: "job_id",
    TrainingCompleted: "job_id",
    DriftSample: "model",
    ReleasePublished: "component",
    Command: "node_id",
    CommandAck: "node_id",
    AuditRecord: "who",
    DriftDetected: "model",
    ModelRegistered: "model",
    ModelAliasSet: "model",
    RolloutPhaseChanged: "rollout",
}


def partition_key(payload: Payload) -> str:
    """The entity an event is about (node, job, model, component): the Kafka key, so its events stay ordered."""
    return getattr(payload, KEY_FIELDS[type(payload)])


def type_name(payload: Payload | type[Payload]) -> str:
    """The CloudEvents type of a payload (instance or class)."""
    cls = payload if isinstance(payload, type) else type(payload)
    try:
        return TYPE_NAMES[cls]
    except KeyError:
        raise InvalidEvent(f"{cls.__name__} is not a registered payload type", "type") from None


def payload_class(type_: str) -> type[Payload]:
    """The Struct for a CloudEvents type, or :class:`InvalidEvent` saying "unknown" or "unsupported version"."""
    cls = PAYLOAD_TYPES.get(type_)
    if cls is not None:
        return cls
    m = _VERSIONED.match(type_)
    if m and m.group("base") in _BASES:
        known = sorted(n for n in PAYLOAD_TYPES if n.startswith(m.group("base") + ".v"))
        raise InvalidEvent(f"unsupported version of {m.group('base')!r}: {type_!r} (supported: {known})", "type")
    raise InvalidEvent(f"unknown event type {type_!r}", "type")
