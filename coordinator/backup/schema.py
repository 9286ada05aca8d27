"""What a backup archive holds: its manifest and the records of its topics, as msgspec Structs.

The manifest is the archive's table of contents and its checksum list: every other member is listed with its
size and SHA-256, so a reader refuses a damaged, truncated or padded archive before it writes anything. Records
keep everything a state record's seal covers (topic, key, kind header, value) and its headers exactly, so a
coordinator holding the same signing key accepts them after a restore.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

FORMAT = "myolo-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TOPICS_DIR = "topics"
CONFIGS_DIR = "configs"
CHECKPOINTS_DIR = "checkpoints"
TOP_LEVEL = frozenset({TOPICS_DIR, CONFIGS_DIR, CHECKPOINTS_DIR})
# what "records" means for every topic: compaction may not have run yet, so a topic can hold older values of a
# key (and tombstones); only the newest record per key is kept, the tombstones among them included
KEPT = "latest-per-key"
_PART = re.compile(r"^[A-Za-z0-9._@+=-]{1,200}$")
MAX_NAME = 1000


class Record(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One Kafka record, as read: bytes are base64 in JSON; ``value`` None is a tombstone."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = []


class Member(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str
    size: int
    sha256: str


class Cluster(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where the backup came from (informational: a restore may go anywhere)."""

    bootstrap: str
    cluster_id: str | None = None


class TopicInfo(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One topic: ``records`` kept (the newest per key), ``read`` from the log, ``tombstones`` among the kept."""

    name: str
    member: str
    partitions: int
    records: int
    read: int
    tombstones: int
    end_offsets: dict[int, int]
    kept: Literal["latest-per-key"] = KEPT


class ConfigInfo(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A config file: where it was read, and the keys whose inline secret was replaced."""

    member: str
    source: str
    redacted: list[str] = []


class CheckpointInfo(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A job's checkpoint manifests (``latest.json``, each step's ``.metadata``), or why there are none."""

    job: str
    checkpoint_dir: str
    members: list[str] = []
    missing: list[str] = []  # "<path>: <reason>", for what could not be read on the machine that made the backup


class Manifest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    format: Literal["myolo-backup"]
    version: int
    created: str  # ISO 8601, UTC
    myolotrain: str
    source: Cluster
    kept: Literal["latest-per-key"] = KEPT
    topics: list[TopicInfo] = []
    absent_topics: list[str] = []  # asked for, but not on the cluster backed up
    configs: list[ConfigInfo] = []
    checkpoints: list[CheckpointInfo] = []
    members: list[Member] = []


class _Head(msgspec.Struct):
    """Just enough of a manifest to tell a foreign or newer file from ours before reading the rest."""

    format: str | None = None
    version: int | None = None


class BadArchive(Exception):
    """The archive cannot be trusted: ``reason`` names the member and what is wrong (expected vs got)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def topic_member(topic: str) -> str:
    return f"{TOPICS_DIR}/{topic}.jsonl"


def check_name(name: str) -> None:
    """A member name we would write: relative, ``/``-separated, no ``.``/``..``, a small character set, under one
    of our folders. Anything else (absolute, traversal, backslashes, NUL) is refused naming the member."""
    if not name or len(name) > MAX_NAME:
        raise BadArchive(f"member name of {len(name)} characters (1 to {MAX_NAME} allowed)")
    if name.startswith("/"):
        raise BadArchive(f"member {name[:200]!r} has an absolute path")
    parts = name.split("/")
    if ".." in parts:
        raise BadArchive(f"member {name[:200]!r} has a '..' in its path")
    if name == MANIFEST:
        return
    if any(p in ("", ".") or not _PART.match(p) for p in parts):
        raise BadArchive(f"member {name[:200]!r} is not a name this format writes (characters A-Z a-z 0-9 ._@+=-)")
    if parts[0] not in TOP_LEVEL or len(parts) < 2:
        raise BadArchive(f"member {name[:200]!r} is outside {sorted(TOP_LEVEL)}")


def safe_part(text: str) -> str:
    """``text`` as one path component of a member name (characters outside the set become ``_``)."""
    cleaned = re.sub(r"[^A-Za-z0-9._@+=-]", "_", text)[:200].lstrip(".")
    return cleaned or "_"


_HEAD = msgspec.json.Decoder(_Head)
_MANIFEST = msgspec.json.Decoder(Manifest)
_ENC = msgspec.json.Encoder()


def encode_manifest(manifest: Manifest) -> bytes:
    return msgspec.json.format(_ENC.encode(manifest), indent=2) + b"\n"


def decode_manifest(raw: bytes) -> Manifest:
    """The manifest, or :class:`BadArchive` saying why not (not JSON, another format, a newer version, a field)."""
    try:
        head = _HEAD.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadArchive(f"{MANIFEST} is not a JSON object: {exc}") from None
    if head.format != FORMAT:
        raise BadArchive(f"{MANIFEST}: format is {head.format!r}, expected {FORMAT!r} (not a myoloctl backup)")
    if head.version != FORMAT_VERSION:
        raise BadArchive(
            f"{MANIFEST}: version {head.version!r}, this myoloctl reads version {FORMAT_VERSION} "
            "(restore with the myoloctl that made the backup)"
        )
    try:
        return _MANIFEST.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadArchive(f"{MANIFEST} is not a valid manifest: {exc}") from None


_RECORD = msgspec.json.Decoder(Record)


def encode_records(records: list[Record]) -> bytes:
    """JSON Lines: one record per line, in the order given (partition then offset)."""
    return b"".join(_ENC.encode(r) + b"\n" for r in records)


def decode_records(member: str, raw: bytes) -> list[Record]:
    out: list[Record] = []
    for n, line in enumerate(raw.splitlines(), 1):
        try:
            out.append(_RECORD.decode(line))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise BadArchive(f"{member} line {n}: not a record: {exc}") from None
    return out
