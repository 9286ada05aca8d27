"""What ``myoloctl`` shows the coordinator API: its bearer token, and which certificate authority it trusts.

The token: ``MYOLO_TOKEN``, else ``$XDG_CONFIG_HOME/myolo/token`` (``~/.config/myolo/token``). Talking to the
local stack (no ``--api``, or only its coordinators' URLs), ``MYOLO_TOKEN`` else the stack's own admin token
(``<state dir>/api/admin.token``), so a token for a real cluster is never sent to a process on this machine. A
token file that group or others may read is refused, as ssh refuses such a private key, naming the file and
``chmod 600``.

TLS: ``myoloctl --ca-file ca.pem ...`` or ``MYOLO_CA_FILE``, else ``$XDG_CONFIG_HOME/myolo/ca.pem`` when it
exists, else the system's trust store.
"""

from __future__ import annotations

import os
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

from myolo.coordinator.api.tokens import local_paths

ENV = "MYOLO_TOKEN"
options: dict[str, str | None] = {"ca_file": None}  # set by myoloctl's global --ca-file (main.py)


class CredentialError(Exception):
    """A token or CA file that cannot be used; the message names it and the fix."""


@dataclass(frozen=True)
class Token:
    value: str
    source: str  # where it came from, for error messages ("MYOLO_TOKEN", a file's path)


def config_dir() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "myolo"


def read_token_file(path: Path) -> Token | None:
    """The token in ``path`` (None when there is no such file); refused if group or others may read it."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CredentialError(f"cannot read the token file {path}: {exc.strerror}") from None
    if st.st_mode & 0o077:
        raise CredentialError(
            f"the token file {path} may be read by others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"a token is a password: chmod 600 {path}"
        )
    try:
        value = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialError(f"cannot read the token file {path}: {exc}") from None
    if not value or len(value.split()) != 1:
        raise CredentialError(f"the token file {path} should hold one token on one line")
    return Token(value, str(path))


def find_token(local_stack: Path | None = None) -> Token | None:
    """The token to send: MYOLO_TOKEN, else the local stack's (when ``local_stack`` is its state dir), else the
    user's token file; None when there is none (the API will answer 401, and we say how to get one)."""
    if os.environ.get(ENV, "").strip():
        return Token(os.environ[ENV].strip(), ENV)
    if local_stack is not None:
        return read_token_file(local_paths(local_stack)[1])
    return read_token_file(config_dir() / "token")


def stack_token(state_dir: Path) -> str | None:
    """The local stack's admin token (what its tools and tests send), None before the stack made one."""
    token = read_token_file(local_paths(state_dir)[1])
    return token.value if token else None


def ca_file() -> str | None:
    given = options["ca_file"] or os.environ.get("MYOLO_CA_FILE")
    if given:
        if not os.path.isfile(given):
            raise CredentialError(f"--ca-file {given}: no such file")
        return given
    default = config_dir() / "ca.pem"
    return str(default) if default.is_file() else None


def tls_context() -> ssl.SSLContext:
    """The client's TLS context: the CA file given or found, else the system's trust store."""
    cafile = ca_file()
    try:
        return ssl.create_default_context(cafile=cafile)
    except (ssl.SSLError, OSError) as exc:
        raise CredentialError(f"--ca-file {cafile}: not a PEM certificate ({exc})") from None


def no_token_hint() -> str:
    return (
        f"set {ENV}, or put your token in {config_dir() / 'token'} (chmod 600); an admin makes one with "
        "`myoloctl token create NAME --role viewer|operator|admin --tokens-file <the coordinators' api.tokens_file>`"
    )
