"""Typed event payloads (msgspec Structs). See ``myolo.events.types`` for the CloudEvents type names."""

from myolo.events.payloads.audit import AuditRecord
from myolo.events.payloads.commands import Command, CommandAck, StartWorkersArgs, StopWorkersArgs
from myolo.events.payloads.common import Payload
from myolo.events.payloads.external import DriftSample, FeatureSummary, ReleasePublished
from myolo.events.payloads.models import (
    DriftDetected,
    EvalResult,
    FeatureDrift,
    GateResult,
    ModelAliasSet,
    ModelExport,
    ModelRegistered,
    RolloutPhaseChanged,
)
from myolo.events.payloads.node import FailedRelease, GpuProcess, GpuReading, HostReading, NodeFault, NodeSample, NvLink
from myolo.events.payloads.reports import BandwidthPoint, BandwidthReport, LeakReport, NcclChannel, NcclReport
from myolo.events.payloads.trainer_job import TrainerJob
from myolo.events.payloads.training import (
    ControlMessage,
    TrainingCompleted,
    TrainingFault,
    TrainingProgress,
    WorkerHeartbeat,
    WorkerInfo,
)

__all__ = [
    "AuditRecord",
    "BandwidthPoint",
    "BandwidthReport",
    "Command",
    "CommandAck",
    "ControlMessage",
    "DriftDetected",
    "DriftSample",
    "EvalResult",
    "FailedRelease",
    "FeatureDrift",
    "FeatureSummary",
    "GateResult",
    "GpuProcess",
    "GpuReading",
    "HostReading",
    "LeakReport",
    "ModelAliasSet",
    "ModelExport",
    "ModelRegistered",
    "NcclChannel",
    "NcclReport",
    "NodeFault",
    "NodeSample",
    "NvLink",
    "Payload",
    "ReleasePublished",
    "RolloutPhaseChanged",
    "StartWorkersArgs",
    "StopWorkersArgs",
    "TrainerJob",
    "TrainingCompleted",
    "TrainingFault",
    "TrainingProgress",
    "WorkerHeartbeat",
    "WorkerInfo",
]
