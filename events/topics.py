"""The topic catalogue: every event topic of Myolotrain, in one place.

Each topic says what it is keyed by (so all events about one entity stay in order on one partition), how
long it keeps data, and which event types may be written to it. The coordinator's durable state lives in
compacted ``myolo.state.*`` topics that its components declare (the coordinator passes their specs, built
with this module's ``Topic(compacted=True)``); ``ensure_topics`` creates any list of topics idempotently.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from myolo.events import types

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: int
    key: str
    types: tuple[str, ...] = ()
    retention_ms: int | None = 7 * DAY_MS
    compacted: bool = False
    description: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def configs(self) -> dict[str, str]:
        cfg = {"cleanup.policy": "compact" if self.compacted else "delete"}
        if self.retention_ms is not None and not self.compacted:
            cfg["retention.ms"] = str(self.retention_ms)
        if self.compacted:
            cfg.update({"min.cleanable.dirty.ratio": "0.1", "segment.ms": str(HOUR_MS)})
        cfg.update(self.extra)
        return cfg


NODE_SAMPLES = "myolo.node.samples"
NODE_FAULTS = "myolo.node.faults"
NODE_REPORTS = "myolo.node.reports"
TRAINING_PROGRESS = "myolo.training.progress"
DRIFT_SAMPLES = "myolo.drift.samples"
RELEASES = "myolo.releases"
MODELS = "myolo.models"
ROLLOUTS = "myolo.rollouts"
COMMANDS = "myolo.commands"
COMMAND_ACKS = "myolo.command.acks"
DEAD_LETTER = "myolo.deadletter"
AUDIT = "myolo.audit"
LEADER = "myolo.coordinator.leader"

CATALOGUE: tuple[Topic, ...] = (
    Topic(
        NODE_SAMPLES,
        12,
        "node id",
        (types.NODE_SAMPLE_V1,),
        1 * DAY_MS,
        description="periodic per-node GPU samples from agents",
    ),
    Topic(
        NODE_FAULTS,
        6,
        "node id",
        (types.NODE_FAULT_V1,),
        30 * DAY_MS,
        description="faults (XID, ECC, health, NCCL, leaks) published the moment they are seen",
    ),
    Topic(
        NODE_REPORTS,
        6,
        "node id",
        (types.NCCL_REPORT_V1, types.NCCL_BANDWIDTH_V1, types.MEMORY_LEAK_V1),
        7 * DAY_MS,
        description="NCCL communicator reports, bandwidth probes, memory-leak trends",
    ),
    Topic(
        TRAINING_PROGRESS,
        12,
        "job id",
        (types.TRAINING_PROGRESS_V1, types.TRAINING_FAULT_V1, types.TRAINING_COMPLETED_V1),
        3 * DAY_MS,
        description="training progress republished by agents, and their workers' faults and completions, per job",
    ),
    Topic(
        DRIFT_SAMPLES,
        6,
        "model",
        (types.DRIFT_SAMPLE_V1,),
        7 * DAY_MS,
        description="features of production traffic, from serving systems (external)",
    ),
    Topic(
        RELEASES,
        1,
        "component",
        (types.RELEASE_PUBLISHED_V1,),
        90 * DAY_MS,
        description="releases published by pipelines (external)",
    ),
    Topic(
        MODELS,
        3,
        "model",
        (types.DRIFT_DETECTED_V1, types.MODEL_REGISTERED_V1, types.MODEL_ALIAS_V1),
        365 * DAY_MS,
        description="the coordinator's model life cycle: drift detected, versions registered, aliases moved",
    ),
    Topic(
        ROLLOUTS,
        1,
        "rollout",
        (types.ROLLOUT_PHASE_V1,),
        365 * DAY_MS,
        description="rolling upgrades' phase changes: waves started, gates passed or failed, rollbacks",
    ),
    Topic(
        COMMANDS,
        12,
        "node id",
        (types.COMMAND_V1,),
        1 * DAY_MS,
        description="signed commands from the leading coordinator to agents",
    ),
    Topic(
        COMMAND_ACKS,
        6,
        "node id",
        (types.COMMAND_ACK_V1,),
        1 * DAY_MS,
        description="agents' acknowledgements of commands",
    ),
    Topic(
        AUDIT,
        3,
        "caller (token name)",
        (types.AUDIT_V1,),
        90 * DAY_MS,
        description="every write to the coordinators' API: who, what, the outcome, from where, when",
    ),
    Topic(
        DEAD_LETTER,
        3,
        "original key",
        (),
        30 * DAY_MS,
        description="records no consumer could accept, with the reason and where they came from",
    ),
    Topic(LEADER, 1, "-", retention_ms=1 * DAY_MS, description="one partition: leadership by group membership"),
)
BY_NAME: dict[str, Topic] = {t.name: t for t in CATALOGUE}


def topic_for_type(type_: str) -> str:
    """The topic an event type is written to (the first whose catalogue entry lists it)."""
    for t in CATALOGUE:
        if type_ in t.types:
            return t.name
    raise KeyError(f"no topic carries event type {type_!r}")


async def ensure_topics(
    admin_kwargs: dict,
    topics: tuple[Topic, ...] = CATALOGUE,
    replication_factor: int = 1,
    timeout_s: float = 30.0,
) -> list[str]:
    """Create missing topics and wait until every partition has a leader. Returns the names created.

    Existing topics are left alone, and a concurrent creator is not an error: running this from several
    processes at start-up is safe.
    """
    admin = AIOKafkaAdminClient(**admin_kwargs)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in topics if t.name not in existing]
        if missing:
            new = [NewTopic(t.name, t.partitions, replication_factor, topic_configs=t.configs()) for t in missing]
            with contextlib.suppress(TopicAlreadyExistsError):
                response = await admin.create_topics(new)
                for name, code, *rest in getattr(response, "topic_errors", ()):
                    if code not in (0, TopicAlreadyExistsError.errno):
                        msg = rest[0] if rest else ""
                        raise RuntimeError(f"cannot create topic {name!r}: Kafka error {code} {msg}")
        await _wait_for_leaders(admin, [t.name for t in topics], timeout_s)
        return [t.name for t in missing]
    finally:
        await admin.close()


async def _wait_for_leaders(admin: AIOKafkaAdminClient, names: list[str], timeout_s: float) -> None:
    """New partitions answer NotLeader for a moment; producers and consumers start cleaner after this."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        described = await admin.describe_topics(names)
        pending = [
            d["topic"]
            for d in described
            if d.get("error_code") or any(p.get("leader", -1) < 0 for p in d.get("partitions", ()))
        ]
        if not pending:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"topics without a leader after {timeout_s:.0f} s: {pending}")
        await asyncio.sleep(0.1)  # polling the broker for a condition, not waiting for simulated time
