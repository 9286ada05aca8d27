"""``myoloctl backup`` and ``myoloctl restore``: the cluster's durable state in one archive, and back.

What the coordinators know lives in the compacted ``myolo.state.*`` topics (jobs, registry, cordons, node keys,
drift, rollouts, the leadership term): a backup reads them to their end and keeps the newest record of each key,
with the configs and the jobs' checkpoint manifests. A restore verifies the whole archive (every member's size
and SHA-256, nothing missing, nothing extra) before it writes anything, and writes only into an empty cluster
unless told otherwise. Records go back byte for byte, so their seals verify for coordinators holding the same
signing key. Progress goes to stderr, the summary to stdout.
"""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import typer
from aiokafka.errors import KafkaError
from rich.console import Console
from rich.markup import escape

from myolo.common.errors import ConfigError
from myolo.common.keys import load_signer
from myolo.coordinator.backup import restore as rs
from myolo.coordinator.backup.archive import Archive, Limits, read_archive
from myolo.coordinator.backup.files import RefusedFile, default_configs
from myolo.coordinator.backup.key_check import check_seals
from myolo.coordinator.backup.make import (
    BackupError,
    BackupRequest,
    default_output,
    default_topics,
    make_backup,
    resolve_topics,
)
from myolo.coordinator.backup.schema import BadArchive
from myolo.coordinator.cli import common, render
from myolo.coordinator.cli.exits import fail
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.coordinator import state_topics, topic_specs
from myolo.coordinator.localstack.broker import state
from myolo.coordinator.state.seal import StateKeys
from myolo.events.settings import KafkaSettings

STATE = state_topics(COMPONENTS)
CATALOGUE = topic_specs(COMPONENTS)
DEFAULT_SHORT = ", ".join(t.removeprefix("myolo.state.") for t in default_topics(STATE))

KafkaConfig = Annotated[
    Path | None,
    typer.Option(
        "--kafka-config",
        help="Reach Kafka as this config file's kafka section says (e.g. /etc/myolo/coordinator.toml: its "
        "bootstrap, SASL user and password file, CA). Default: --bootstrap, or the local stack.",
        show_default=False,
    ),
]


def settings_for(bootstrap: str | None, kafka_config: Path | None, user: Literal["operator", "admin"]) -> KafkaSettings:
    """From ``--kafka-config`` (its bootstrap replaced by ``--bootstrap`` if given), else myoloctl's usual way."""
    if kafka_config is None:
        return common.kafka_settings(bootstrap, user=user)
    try:
        doc = tomllib.loads(kafka_config.read_text())
        found = msgspec.convert(doc.get("kafka", {}), KafkaSettings)
    except OSError as exc:
        fail(f"--kafka-config: cannot read {str(kafka_config)!r}: {exc.strerror}", 2)
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        fail(f"--kafka-config: {str(kafka_config)!r}: [kafka] is not valid: {exc}", 2)
    return common.resolved(msgspec.structs.replace(found, client_id="myoloctl", bootstrap=bootstrap or found.bootstrap))


@contextmanager
def progress_on_stderr(first: str) -> Iterator[rs.Progress]:
    """A spinner with the latest step on a terminal; one line per step when stderr is piped."""
    console = common.err_console
    if not console.is_terminal:
        yield lambda msg: console.print(escape(msg))
        return
    with console.status(escape(first)) as status:
        yield lambda msg: status.update(escape(msg))


def backup(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Archive to write (.tar.gz); it must not exist. Default: myolo-backup-YYYYMMDD-HHMMSS.tar.gz (UTC) "
            "here.",
            show_default=False,
        ),
    ] = None,
    topics: Annotated[
        list[str] | None,
        typer.Option(
            "--topics",
            help=f"State topics to back up, short or full names, comma-separated or repeated. Default: {DEFAULT_SHORT} "
            "(commands is left out: restoring pending command intents would make the next leader send them again).",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        list[Path] | None,
        typer.Option(
            "--config",
            help="Config file to include (repeatable). Default: the local stack's coordinator.toml files and the "
            "readable /etc/myolo/*.toml. Key, token and password files are refused; inline secrets are redacted.",
            show_default=False,
        ),
    ] = None,
    no_configs: Annotated[bool, typer.Option("--no-configs", help="Include no config file.")] = False,
    no_checkpoints: Annotated[
        bool, typer.Option("--no-checkpoints", help="Skip the jobs' checkpoint manifests (latest.json, .metadata).")
    ] = False,
    kafka_config: KafkaConfig = None,
    bootstrap: common.Bootstrap = None,
) -> None:
    """Back up the cluster's durable state to one .tar.gz: the state topics (the newest record of each key, with
    its headers and seal), configs, and each job's checkpoint manifests (not the tensors). Run it before an
    upgrade: `myoloctl backup --output /mnt/nas/backup_YYYYMMDD.tar.gz`; check it with `myoloctl restore FILE
    --dry-run`."""
    try:
        chosen = resolve_topics(topics, STATE) if topics else default_topics(STATE)
    except BackupError as exc:
        fail(str(exc), 2)
    configs = [] if no_configs else (config or default_configs(state.default_state_dir()))
    settings = settings_for(bootstrap, kafka_config, "operator")  # reading: the read-only operator will do
    req = BackupRequest(
        output=output or default_output(), topics=chosen, configs=configs, checkpoints=not no_checkpoints
    )
    try:
        with progress_on_stderr("reading the state topics...") as progress:
            result = asyncio.run(make_backup(settings, req, progress))
    except (BackupError, RefusedFile) as exc:
        fail(str(exc), 2)
    except (KafkaError, ConfigError, TimeoutError, RuntimeError, OSError) as exc:
        fail(f"backup failed, nothing written to {str(req.output)!r}: {_reason(exc)}", 1)
    out = Console(highlight=False, soft_wrap=True)
    m = result.manifest
    rows = [[t.name, str(t.partitions), str(t.read), str(t.records), str(t.tombstones)] for t in m.topics]
    render.table(out, ["TOPIC", "PARTITIONS", "READ", "KEPT", "TOMBSTONES"], rows)
    for name in result.absent:
        common.err_console.print(f"[yellow]warning:[/] topic {escape(name)} does not exist on the cluster: skipped")
    for c in m.configs:
        note = f" (redacted: {', '.join(c.redacted)})" if c.redacted else ""
        out.print(f"config      {escape(c.source)} -> {escape(c.member)}{escape(note)}")
    for ck in m.checkpoints:
        missing = f", {len(ck.missing)} missing" if ck.missing else ""
        out.print(f"checkpoint  {escape(ck.job)}: {len(ck.members)} files{missing} ({escape(ck.checkpoint_dir)})")
    out.print(f"wrote {escape(str(result.path))}: {len(m.members)} members, {result.size} bytes")


def restore(
    file: Annotated[Path, typer.Argument(help="Archive written by `myoloctl backup`.", show_default=False)],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Verify the archive only (offline): connect to no cluster, write nothing.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Restore into topics that already hold records (the backup's records are written after them, so "
            "each key's newest value is the backup's), and replace files under --restore-configs.",
        ),
    ] = False,
    restore_configs: Annotated[
        Path | None,
        typer.Option(
            "--restore-configs",
            help="Write the archive's configs and checkpoint manifests under this folder (configs/..., "
            "checkpoints/<job>/...). Default: list them, write none.",
            show_default=False,
        ),
    ] = None,
    replication_factor: Annotated[
        int, typer.Option("--replication-factor", min=1, help="For topics created by the restore (3 in production).")
    ] = 1,
    max_bytes: Annotated[
        int, typer.Option("--max-bytes", min=1, help="Refuse an archive decompressing to more than this many bytes.")
    ] = Limits.max_total_bytes,
    max_members: Annotated[
        int, typer.Option("--max-members", min=1, help="Refuse an archive with more members than this.")
    ] = Limits.max_members,
    key_file: Annotated[
        Path | None,
        typer.Option(
            "--key-file",
            help="The coordinators' signing key (signing.key_file): check every record's seal with it first, as "
            "the restored coordinators will (a record sealed with another key would be skipped as forged).",
            show_default=False,
        ),
    ] = None,
    kafka_config: KafkaConfig = None,
    bootstrap: common.Bootstrap = None,
) -> None:
    """Restore a backup into an empty cluster: verify every member of the archive (exit 2 naming the first one
    that is damaged, missing or not listed: nothing is written), refuse topics that already hold records (unless
    --force), create the missing topics from the catalogue, write each record back to its partition with its key,
    value and headers, and read them back to check."""
    limits = Limits(
        max_members=max_members, max_member_bytes=min(max_bytes, Limits.max_member_bytes), max_total_bytes=max_bytes
    )
    try:
        archive = read_archive(file, limits)
        rs.catalogue_topics(archive, CATALOGUE)
    except (BadArchive, rs.RestoreRefused) as exc:
        fail(f"refused {str(file)!r}: {exc}", 2)
    out = Console(highlight=False, soft_wrap=True)
    _describe(out, archive)
    if key_file is not None:
        _check_seals(out, archive, key_file)
    members = rs.files_to_restore(archive)
    if restore_configs is not None:
        try:
            rs.check_destination(restore_configs, members, force)
        except rs.RestoreRefused as exc:
            fail(str(exc), 2)
    if dry_run:
        out.print(f"verified {len(archive.manifest.members) + 1} members of {escape(str(file))}: nothing written")
        return
    settings = settings_for(bootstrap, kafka_config, "admin")  # writing to state topics: the admin
    try:
        with progress_on_stderr("checking the target cluster...") as progress:
            done = asyncio.run(_restore(settings, archive, force, replication_factor, progress))
    except rs.RestoreRefused as exc:
        fail(f"refused: {exc}", 1)
    except (KafkaError, ConfigError, TimeoutError, RuntimeError, OSError) as exc:
        fail(f"restore failed: {_reason(exc)}", 1)
    rows = [[d.name, str(d.partitions), str(d.written), str(d.verified)] for d in done]
    render.table(out, ["TOPIC", "PARTITIONS", "WRITTEN", "READ BACK"], rows)
    if restore_configs is None:
        if members:
            out.print(f"{len(members)} files not written (pass --restore-configs DIR to write them)")
        return
    try:
        written = rs.write_files(restore_configs, archive, members)
    except OSError as exc:
        fail(f"--restore-configs: {_reason(exc)} (the topics were restored)", 1)
    for path in written:
        out.print(f"wrote {escape(str(path))}")


def _check_seals(out: Console, archive: Archive, key_file: Path) -> None:
    try:
        signer = load_signer(key_file, "--key-file")
    except ConfigError as exc:
        fail(f"{exc.key}: {exc.reason}", 2)
    report = check_seals(archive, StateKeys.derive(signer))
    if report.failed:
        fail(
            f"refused: {report.failed} of {report.checked} records are not sealed with the key of {str(key_file)!r} "
            f"(a coordinator holding it would skip them as forged); first: {'; '.join(report.first)}",
            2,
        )
    out.print(f"seals: all {report.checked} records verify with key {signer.key_id}")


async def _restore(
    settings: KafkaSettings, archive: Archive, force: bool, replication_factor: int, progress: rs.Progress
) -> list[rs.TopicRestored]:
    topics = await rs.check_target(settings, archive, force, CATALOGUE)
    return await rs.restore_topics(
        settings, archive, topics, catalogue=CATALOGUE, replication_factor=replication_factor, progress=progress
    )


def _describe(out: Console, archive: Archive) -> None:
    m = archive.manifest
    source = m.source.bootstrap + (f" (cluster {m.source.cluster_id})" if m.source.cluster_id else "")
    out.print(f"backup of {escape(source)}, {escape(m.created)}, myolotrain {escape(m.myolotrain)}; keeps {m.kept}")
    rows = [[t.name, str(t.partitions), str(t.records), str(t.tombstones)] for t in m.topics]
    render.table(out, ["TOPIC", "PARTITIONS", "RECORDS", "TOMBSTONES"], rows)
    for c in m.configs:
        out.print(f"config      {escape(c.member)} (from {escape(c.source)})")
    for ck in m.checkpoints:
        missing = f", {len(ck.missing)} missing at backup time" if ck.missing else ""
        out.print(f"checkpoint  {escape(ck.job)}: {len(ck.members)} files{missing} ({escape(ck.checkpoint_dir)})")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConfigError):
        return f"{exc.key}: {exc.reason}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename or ''}: {exc.strerror}".lstrip(": ")
    return str(exc) or type(exc).__name__
