"""Making a backup: the state topics read to their end, configs and checkpoint manifests, in one archive.

Refusals come first (a key file among the configs, an output that exists, a folder that is not there), so a
backup that cannot be made fails before it reads the cluster; the archive is written to a temp file and renamed,
so a failed backup never leaves a partial file under the name asked for.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from myolo.coordinator.backup.archive import ArchiveWriter
from myolo.coordinator.backup.files import Collected, collect_checkpoints, collect_configs, job_checkpoint_dirs
from myolo.coordinator.backup.schema import (
    FORMAT,
    FORMAT_VERSION,
    Cluster,
    Manifest,
    TopicInfo,
    encode_records,
    topic_member,
)
from myolo.coordinator.backup.state_read import Progress, TopicDump, cluster_id, read_topics
from myolo.coordinator.core.component import StateTopic
from myolo.coordinator.jobs.records import STATE_JOBS
from myolo.events.settings import KafkaSettings

PREFIX = "myolo.state."


def default_topics(state: Sequence[StateTopic]) -> list[str]:
    """The state topics a backup takes when none is named: each that its owner marks for backup. The leadership
    term is among them (restoring it keeps epochs growing: agents fence commands whose epoch is below the highest
    they saw, so a restored cluster starting again at epoch 1 would be refused by every agent)."""
    return [st.topic for st in state if st.backup]


class BackupError(Exception):
    """A backup that cannot be made; the message names the option or file and the fix."""


@dataclass
class BackupRequest:
    output: Path
    topics: list[str]  # full state topic names (see default_topics, resolve_topics)
    configs: list[Path] = field(default_factory=list)
    checkpoints: bool = True


@dataclass
class BackupResult:
    path: Path
    size: int
    manifest: Manifest
    absent: list[str]


def resolve_topics(names: list[str], state: Sequence[StateTopic]) -> list[str]:
    """Short names (``jobs``, ``node-keys``) or full ones (``myolo.state.jobs``), comma-separated or repeated;
    each must be one of ``state`` (the state topics of the coordinator's components)."""
    known = [st.topic for st in state]
    out: list[str] = []
    for raw in names:
        for name in filter(None, (n.strip() for n in raw.split(","))):
            full = name if name.startswith(PREFIX) else PREFIX + name
            if full not in known:
                short = ", ".join(s.removeprefix(PREFIX) for s in known)
                raise BackupError(f"--topics: {name!r} is not a state topic (one of: {short})")
            if full not in out:
                out.append(full)
    if not out:
        raise BackupError("--topics: no topic given")
    return out


def default_output(now: float | None = None) -> Path:
    """``myolo-backup-YYYYMMDD-HHMMSS.tar.gz`` (UTC) in the current folder."""
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y%m%d-%H%M%S")
    return Path(f"myolo-backup-{stamp}.tar.gz")


def myolotrain_version() -> str:
    try:
        return metadata.version("myolotrain")
    except metadata.PackageNotFoundError:
        return "unknown"


def check_output(path: Path) -> None:
    if path.exists():
        raise BackupError(f"--output: {str(path)!r} already exists (choose another name, or move it away first)")
    if not path.parent.is_dir():
        raise BackupError(f"--output: folder {str(path.parent)!r} does not exist (create it first)")
    if not path.name.endswith((".tar.gz", ".tgz")):
        raise BackupError(f"--output: {str(path)!r} should end in .tar.gz (it is a gzip'd tar)")


async def make_backup(settings: KafkaSettings, req: BackupRequest, progress: Progress) -> BackupResult:
    check_output(req.output)
    collected = Collected()
    collect_configs(req.configs, collected)  # RefusedFile before anything is read from the cluster
    started = time.time()
    progress(f"reading {len(req.topics)} state topics from {settings.resolved_bootstrap()}")
    dumps, absent = await read_topics(settings, req.topics, progress)
    if not dumps:
        raise BackupError(
            f"none of the topics asked for exists on {settings.resolved_bootstrap()} ({', '.join(absent)}): is it the "
            "cluster's bootstrap address (--bootstrap, --kafka-config)?"
        )
    jobs = next((d for d in dumps if d.name == STATE_JOBS), None)
    if req.checkpoints and jobs is not None:
        dirs = job_checkpoint_dirs(jobs.records)
        progress(f"reading the checkpoint manifests of {len(dirs)} jobs")
        collect_checkpoints(dirs, collected)
    manifest = Manifest(
        format=FORMAT,
        version=FORMAT_VERSION,
        created=datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        myolotrain=myolotrain_version(),
        source=Cluster(bootstrap=settings.resolved_bootstrap(), cluster_id=await cluster_id(settings)),
        topics=[_topic_info(d) for d in dumps],
        absent_topics=absent,
        configs=collected.configs,
        checkpoints=collected.checkpoints,
    )
    writer = ArchiveWriter()
    try:
        for d in dumps:
            writer.add(topic_member(d.name), encode_records(d.records))
        for f in collected.files:
            writer.add(f.member, f.data)
        progress(f"writing {req.output}")
        size = writer.write(req.output, manifest, started)
        manifest.members = writer.members
    finally:
        writer.close()
    return BackupResult(path=req.output, size=size, manifest=manifest, absent=absent)


def _topic_info(d: TopicDump) -> TopicInfo:
    return TopicInfo(
        name=d.name,
        member=topic_member(d.name),
        partitions=d.partitions,
        records=len(d.records),
        read=d.read,
        tombstones=d.tombstones,
        end_offsets=d.end_offsets,
    )
