"""The files a backup carries besides the topics: config files and the jobs' checkpoint manifests.

Configs: a coordinator's TOML names its key and password files by path; the files themselves are secrets and
never go into a backup (a path that looks like one is refused, naming it), and a secret written inline in a
config (``sasl_password = "..."``) is replaced by a placeholder, the key listed in the manifest.

Checkpoints: the manifests only (``latest.json`` and each step directory's ``.metadata``), not the tensors:
enough to see after a restore which step each job had reached and that its checkpoint directory is complete.
The names (``latest.json``, ``step-NNNNNNNN``, ``.metadata``) are kernels/checkpoint's (marker.py, layout.py),
repeated here because coordinator code does not import the kernels.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from myolo.coordinator.backup.schema import CHECKPOINTS_DIR, CONFIGS_DIR, CheckpointInfo, ConfigInfo, Record, safe_part
from myolo.coordinator.jobs.records import JobRecord
from myolo.coordinator.state.codec import record_kind

MAX_CONFIG_BYTES = 1 << 20
MAX_CHECKPOINT_FILE_BYTES = 256 << 20
MARKER_NAME = "latest.json"
METADATA = ".metadata"
STEP_DIR = re.compile(r"^(step|snap)-\d{8}$")
_SECRET_NAME = re.compile(r"(\.(key|p12|pfx|jks|keystore|secret)$)|token|passw|secret|credential", re.IGNORECASE)
_INLINE_SECRET = re.compile(r"^(\s*)([A-Za-z0-9_]*(password|secret|token)[A-Za-z0-9_]*)(\s*=\s*)(.+)$", re.IGNORECASE)
_PATH_KEY = re.compile(r"_(file|files|dir|path)$", re.IGNORECASE)
PLACEHOLDER = '"<redacted by myoloctl backup>"'


class RefusedFile(ValueError):
    """A file a backup must not hold (a key, token or password file), or cannot read: the message names it."""


@dataclass
class CollectedFile:
    member: str
    data: bytes


@dataclass
class Collected:
    files: list[CollectedFile] = field(default_factory=list)
    configs: list[ConfigInfo] = field(default_factory=list)
    checkpoints: list[CheckpointInfo] = field(default_factory=list)


def default_configs(state_dir: Path, etc: Path = Path("/etc/myolo")) -> list[Path]:
    """The local stack's coordinator configs (``<state dir>/coordinators/*/coordinator.toml``) and the readable
    ``/etc/myolo/*.toml``, those that exist; a name that looks like a secret's is left out here (given with
    ``--config`` it is refused, naming it)."""
    found = sorted(state_dir.glob("coordinators/*/coordinator.toml"))
    with contextlib.suppress(OSError):  # /etc/myolo not readable: nothing from there
        found += sorted(p for p in etc.glob("*.toml") if p.is_file() and os.access(p, os.R_OK))
    return [p for p in found if secret_reason(p) is None]


def secret_reason(path: Path, data: bytes | None = None) -> str | None:
    """Why ``path`` looks like a key, token or password file (None when it does not)."""
    if _SECRET_NAME.search(path.name):
        return "its name says it is a key, token or password file"
    if data is not None and b"PRIVATE KEY-----" in data:
        return "it holds a private key"
    return None


def redact(text: str) -> tuple[str, list[str]]:
    """``text`` with every inline ``*password*``/``*secret*``/``*token*`` value replaced (paths to such files,
    ``*_file`` keys, are kept: they are not secrets); and the keys replaced."""
    out: list[str] = []
    keys: list[str] = []
    for line in text.splitlines(keepends=True):
        m = _INLINE_SECRET.match(line.rstrip("\r\n"))
        if m and not _PATH_KEY.search(m.group(2)) and not line.lstrip().startswith("#"):
            keys.append(m.group(2))
            line = f"{m.group(1)}{m.group(2)}{m.group(4)}{PLACEHOLDER}" + line[len(line.rstrip("\r\n")) :]
        out.append(line)
    return "".join(out), keys


def collect_configs(paths: list[Path], into: Collected) -> None:
    """Read each config (refusing key, token and password files, naming them) under a unique member name."""
    taken = {c.member for c in into.configs}
    for path in paths:
        reason = secret_reason(path)
        if reason is None:
            data = _read(path, MAX_CONFIG_BYTES)
            reason = secret_reason(path, data)
        if reason is not None:
            raise RefusedFile(f"config {str(path)!r} is not backed up: {reason} (back up secrets separately)")
        try:
            text, keys = redact(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise RefusedFile(f"config {str(path)!r} is not UTF-8 text (is it a config?)") from None
        member = _unique(f"{CONFIGS_DIR}/{safe_part(path.name)}", f"{safe_part(path.parent.name)}-", taken)
        taken.add(member)
        into.files.append(CollectedFile(member, text.encode()))
        into.configs.append(ConfigInfo(member=member, source=str(path), redacted=keys))


def _unique(member: str, prefix: str, taken: set[str]) -> str:
    if member not in taken:
        return member
    head, _, name = member.rpartition("/")
    for n in range(1, 10_000):
        candidate = f"{head}/{prefix}{name}" if n == 1 else f"{head}/{prefix}{n}-{name}"
        if candidate not in taken:
            return candidate
    raise RefusedFile(f"too many configs named {name!r}")


def _read(path: Path, limit: int) -> bytes:
    try:
        if not path.is_file():
            raise RefusedFile(f"config {str(path)!r} is not a regular file")
        size = path.stat().st_size
        if size > limit:
            raise RefusedFile(f"config {str(path)!r} is {size} bytes, more than {limit} (is it a config?)")
        return path.read_bytes()
    except OSError as exc:
        raise RefusedFile(
            f"cannot read config {str(path)!r}: {exc.strerror} (fix: pass --config paths you can read)"
        ) from None


_JOB = msgspec.json.Decoder(JobRecord)


def job_checkpoint_dirs(records: list[Record]) -> dict[str, str]:
    """Job name -> checkpoint directory, from the jobs topic's records (a record that does not decode, or a job
    without a checkpoint directory, has none)."""
    out: dict[str, str] = {}
    for r in records:
        if r.value is None or r.key is None or record_kind(r.headers) != "job":
            continue
        try:
            job = _JOB.decode(r.value)
        except msgspec.ValidationError:
            try:
                job = JobRecord.from_flat(r.value)  # an earlier form (a flat trainer job)
            except (msgspec.DecodeError, msgspec.ValidationError, TypeError):
                continue
        except msgspec.DecodeError:
            continue
        if job.spec.job.trainer.checkpoint.dir:
            out[r.key.decode(errors="replace")] = job.spec.job.trainer.checkpoint.dir
    return out


def collect_checkpoints(jobs: dict[str, str], into: Collected) -> None:
    """Each job's ``latest.json`` and step directories' ``.metadata``, when readable here; else listed missing."""
    used: set[str] = set()
    for job, directory in sorted(jobs.items()):
        info = CheckpointInfo(job=job, checkpoint_dir=directory)
        root = Path(directory)
        base = _unique(f"{CHECKPOINTS_DIR}/{safe_part(job)}", "job-", used)
        used.add(base)
        wanted = [(root / MARKER_NAME, f"{base}/{MARKER_NAME}")]
        try:
            steps = sorted(p for p in root.iterdir() if STEP_DIR.match(p.name) and p.is_dir())
        except OSError as exc:
            info.missing.append(f"{root}: {exc.strerror or exc}")
            into.checkpoints.append(info)
            continue
        wanted += [(p / METADATA, f"{base}/{p.name}/{METADATA}") for p in steps]
        for path, member in wanted:
            try:
                size = path.stat().st_size
                if size > MAX_CHECKPOINT_FILE_BYTES:
                    info.missing.append(f"{path}: {size} bytes, more than {MAX_CHECKPOINT_FILE_BYTES}")
                    continue
                data = path.read_bytes()
            except OSError as exc:
                info.missing.append(f"{path}: {exc.strerror or exc}")
                continue
            into.files.append(CollectedFile(member, data))
            info.members.append(member)
        into.checkpoints.append(info)
