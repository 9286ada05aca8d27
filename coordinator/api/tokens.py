"""API tokens: the file of their hashes the coordinator reads, and the writes ``myoloctl token`` makes to it.

One token per line, ``<name> <role> sha256:<hex> [created=<ISO time>]``, ``#`` starts a comment. A token is
``myolo_`` + 32 random bytes from ``secrets`` (256 bits, URL-safe base64); only its SHA-256 is kept, so the
file is no secret worth stealing (a 256-bit token cannot be guessed from its hash: no salt or slow hash is
needed), but whoever can *write* it can make themselves admin, so a file that group or others may write, or
that everyone may read, is refused. The coordinator notices a changed file on the next request (its inode,
size and mtime), so revoking a token needs no restart; a file that turns unreadable or invalid fails closed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import structlog

from myolo.common.errors import ConfigError
from myolo.common.files import atomic_write

log = structlog.get_logger("myolo.coordinator.api")

# scrape: GET /metrics and nothing else (a Prometheus server's token); then each role can do what the one before can
Role = Literal["scrape", "viewer", "operator", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)
RANK: dict[str, int] = {r: i for i, r in enumerate(ROLES)}
FIELD = "api.tokens_file"
PREFIX = "myolo_"
MAX_TOKEN = 256
NAME = re.compile(r"^[A-Za-z0-9][\w.@:+-]{0,63}$")
_HASH = re.compile(r"^sha256:([0-9a-f]{64})$")
HEADER = "# myolo API tokens: <name> <role> sha256:<hex of the token's SHA-256> [created=<time>]\n"


@dataclass(frozen=True)
class TokenEntry:
    name: str
    role: Role
    digest: bytes  # SHA-256 of the token
    created: str = ""

    def line(self) -> str:
        created = f" created={self.created}" if self.created else ""
        return f"{self.name} {self.role} sha256:{self.digest.hex()}{created}\n"


def new_token() -> str:
    """A fresh bearer token: 256 random bits."""
    return PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise ValueError(f"token name {name!r}: 1-64 of letters, digits and . _ @ : + - (starting with a letter/digit)")
    return name


def check_role(role: str) -> Role:
    if role not in ROLES:
        raise ValueError(f"role {role!r}: one of {', '.join(ROLES)}")
    return role  # type: ignore[return-value]


def parse(text: str, where: str) -> list[TokenEntry]:
    """The entries of a tokens file; ConfigError naming the line at fault."""
    entries: list[TokenEntry] = []
    names: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        try:
            if len(parts) not in (3, 4):
                raise ValueError("expected <name> <role> sha256:<hex> [created=<time>]")
            name, role = check_name(parts[0]), check_role(parts[1])
            m = _HASH.match(parts[2])
            if m is None:
                raise ValueError(f"{parts[2][:20]!r} is not sha256:<64 lowercase hex digits>")
            created = parts[3] if len(parts) == 4 else ""
            if created and not created.startswith("created="):
                raise ValueError(f"{created[:20]!r}: the fourth field is created=<time>")
            if name in names:
                raise ValueError(f"token name {name!r} appears twice")
        except ValueError as exc:
            raise ConfigError(FIELD, f"{where} line {number}: {exc}") from None
        names.add(name)
        entries.append(TokenEntry(name, role, bytes.fromhex(m.group(1)), created.removeprefix("created=")))
    return entries


def check_mode(path: Path) -> os.stat_result:
    """The file's stat, or ConfigError when it is missing, not a file, or others may write it or everyone read it."""
    try:
        st = path.stat()
    except OSError as exc:
        raise ConfigError(FIELD, f"cannot read {str(path)!r}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(FIELD, f"{str(path)!r} is not a regular file")
    if st.st_mode & 0o026:
        raise ConfigError(
            FIELD,
            f"{str(path)!r} may be written by group or others or read by everyone (mode "
            f"{stat.S_IMODE(st.st_mode):04o}); whoever writes it can make an admin token: chmod 600 {path}",
        )
    return st


def load(path: str | Path) -> list[TokenEntry]:
    """Read and check a tokens file (mode first): ConfigError naming ``api.tokens_file`` and the fix."""
    path = Path(path)
    check_mode(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(FIELD, f"cannot read {str(path)!r}: {exc}") from None
    return parse(text, str(path))


def _signature(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)


class TokensUnavailable(Exception):
    """The tokens file cannot be used right now (removed, made writable by others, broken): nobody gets in."""


class TokenStore:
    """The tokens of one file, read again whenever the file changed; ``match`` compares in constant time."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._seen: tuple[int, ...] | None = None
        self._entries: list[TokenEntry] = []
        self._broken: str | None = None
        self.reloads = 0
        self._refresh()
        if self._broken is not None:
            raise ConfigError(FIELD, self._broken)

    def entries(self) -> list[TokenEntry]:
        self._refresh()
        if self._broken is not None:
            raise TokensUnavailable(self._broken)
        return list(self._entries)

    def match(self, token: str) -> TokenEntry | None:
        """The entry whose hash is the token's, or None. Every entry is compared, each in constant time."""
        entries = self.entries()
        wanted = digest(token)
        found = None
        for entry in entries:
            if hmac.compare_digest(entry.digest, wanted):
                found = entry
        return found

    def _refresh(self) -> None:
        try:
            st = check_mode(self.path)
        except ConfigError as exc:
            self._fail(exc.reason, None)
            return
        signature = _signature(st)
        if signature == self._seen and self._broken is None:
            return
        try:
            self._entries = load(self.path)
        except ConfigError as exc:
            self._fail(exc.reason, signature)
            return
        if self._seen is not None:
            log.info("API tokens file read again", path=str(self.path), tokens=len(self._entries))
        self._seen, self._broken = signature, None
        self.reloads += 1

    def _fail(self, reason: str, signature: tuple[int, ...] | None) -> None:
        if self._broken != reason:
            log.error("API tokens file unusable: every request is refused until it is fixed", reason=reason)
        self._broken, self._entries, self._seen = reason, [], signature


# ---- what `myoloctl token` writes ----------------------------------------------------------------------------
def _existing(path: Path) -> str:
    if not path.exists():
        return ""
    load(path)  # refuse to extend a file the coordinator would refuse
    return path.read_text()


def add(path: str | Path, name: str, role: str, now: float | None = None) -> str:
    """Make a token for ``name`` with ``role``, append its hash (the file is created 0600), return the token."""
    path = Path(path)
    entry_name, entry_role = check_name(name), check_role(role)
    text = _existing(path)
    if any(e.name == entry_name for e in parse(text, str(path))):
        raise ValueError(f"a token named {name!r} exists already in {path}; revoke it first or pick another name")
    token = new_token()
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    line = TokenEntry(entry_name, entry_role, digest(token), created).line()
    text = text or HEADER
    atomic_write(path, (text if text.endswith("\n") else text + "\n").encode() + line.encode(), mode=0o600)
    return token


def revoke(path: str | Path, name: str) -> bool:
    """Remove ``name``'s line (the coordinator stops accepting its token on the next request); False if absent."""
    path = Path(path)
    text = _existing(path)
    kept, removed = [], False
    for raw in text.splitlines(keepends=True):
        fields = raw.split("#", 1)[0].split()
        if fields and fields[0] == name:
            removed = True
            continue
        kept.append(raw)
    if removed:
        atomic_write(path, "".join(kept).encode(), mode=0o600)
    return removed


# ---- the local stack's admin token ---------------------------------------------------------------------------
LOCAL_ADMIN = "local-admin"


def local_paths(state_dir: Path) -> tuple[Path, Path]:
    """(tokens file, the admin token itself) of a local stack: ``<state dir>/api/``, both 0600."""
    return state_dir / "api" / "tokens", state_dir / "api" / "admin.token"


def ensure_local(state_dir: Path) -> Path:
    """The local stack's tokens file, holding one admin token that ``myoloctl`` reads from ``admin.token`` (made
    on first use; made again if either file is missing or they no longer match). Returns the tokens file."""
    tokens_file, token_file = local_paths(state_dir)
    try:
        token = token_file.read_text().strip()
        if any(hmac.compare_digest(e.digest, digest(token)) for e in load(tokens_file)):
            return tokens_file
    except (OSError, ConfigError):
        pass
    for stale in (tokens_file, token_file):
        stale.unlink(missing_ok=True)
    token = add(tokens_file, LOCAL_ADMIN, "admin")
    atomic_write(token_file, (token + "\n").encode(), mode=0o600)
    return tokens_file


def ensure_token(tokens_file: Path, token_file: Path, name: str, role: str) -> str:
    """The token kept in ``token_file`` for ``name`` with ``role`` in ``tokens_file``: made (and written 0600) when
    the file is missing or no longer matches, replacing an older token of that name. Returns the token."""
    try:
        token = token_file.read_text().strip()
        if any(
            e.name == name and e.role == role and hmac.compare_digest(e.digest, digest(token))
            for e in load(tokens_file)
        ):
            return token
    except (OSError, ConfigError):
        pass
    revoke(tokens_file, name)
    token = add(tokens_file, name, role)
    atomic_write(token_file, (token + "\n").encode(), mode=0o600)
    return token
