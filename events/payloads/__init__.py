"""Typed event payloads (msgspec Structs). See ``events.types`` for the CloudEvents type names."""

from events.payloads.audit import AuditRecord
from events.payloads.commands import Command, CommandAck, StartWorkersArgs, StopWorkersArgs
from events.payloads.common import Payload
from events.payloads.external import DriftSample, FeatureSummary, ReleasePublished
from events.payloads.models import (
    DriftDetected,
    EvalResult,
    FeatureDrift,
    GateResult,
    ModelAliasSet,
    ModelExport,
    ModelRegistered,
    RolloutPhaseChanged,
)
from events.payloads.node import FailedRelease, GpuProcess, GpuReading, HostReading, NodeFault, NodeSample, NvLink
from events.payloads.reports import BandwidthPoint, BandwidthReport, LeakReport, NcclChannel, NcclReport
from events.payloads.trainer_job import TrainerJob
from events.payloads.training import (
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
