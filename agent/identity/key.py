"""The ``[identity]`` section of ``agent.toml`` and the node key it names."""

from __future__ import annotations

from pathlib import Path

import msgspec

from myolo.common.errors import ConfigError
from myolo.common.keys import Ed25519Signer, ensure_ed25519

FIELD = "identity.key_file"
DEFAULT_NAME = "node.key"


class IdentityConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    # the node's Ed25519 private key, mode 0600; generated at the first start with its public half beside it
    # (<key_file>.pub, what `myoloctl node enroll` registers). Default: <data_dir>/node.key
    key_file: str = ""


def node_key(cfg: IdentityConfig, *, create: bool = True) -> Ed25519Signer:
    """The node's key, generated on first use (``create``); a key others can read (or that is not Ed25519)
    fails the start naming ``identity.key_file``."""
    path = Path(cfg.key_file)
    if not create and not path.exists():
        raise ConfigError(
            FIELD,
            f"no node key at {str(path)!r} yet: the agent makes it at its first start "
            "(or run `myolo-agent key show --generate` as the agent's user)",
        )
    try:
        return ensure_ed25519(path, FIELD)
    except OSError as exc:
        raise ConfigError(FIELD, f"cannot create the node key {str(path)!r}: {exc.strerror or exc}") from None
