"""The ``[commands]`` section of ``agent.toml``: whether the agent obeys the coordinator, and whom it trusts.

Off by default: an agent obeys commands only once it has the coordinators' key (``key_files``, several during
a key rotation): their Ed25519 public key (``coordinator.key.pub``, which cannot sign), or the legacy shared
HMAC secret (then readable by its owner only). The daemon mounts this Struct as ``AgentConfig.commands``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec

from myolo.agent.commands.ledger import DEFAULT_MAX_IDS
from myolo.common.errors import ConfigError
from myolo.common.keys import load_verify_key
from myolo.events.signing import Verifier


class CommandsConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = False
    key_files: list[str] = []
    state_dir: str = ""  # default: <data_dir>/commands
    # how many command ids (and their outcomes) are remembered for "duplicate" answers
    max_remembered: Annotated[int, msgspec.Meta(ge=16, le=1_000_000)] = DEFAULT_MAX_IDS
    # commands issued longer ago than this are rejected (0 disables): guards a new node replaying old ones
    max_age_s: Annotated[float, msgspec.Meta(ge=0)] = 3600.0


def load_verifier(cfg: CommandsConfig) -> Verifier:
    """The trusted keys, read now so a missing or short key file fails the start naming the key."""
    if not cfg.key_files:
        raise ConfigError(
            "commands.key_files",
            "commands are enabled but no key file is given; list the coordinators' public key file(s) "
            "(coordinator.key.pub), or set commands.enabled = false",
        )
    return Verifier(
        load_verify_key(Path(path).expanduser(), f"commands.key_files[{i}]") for i, path in enumerate(cfg.key_files)
    )


def commands_state_dir(cfg: CommandsConfig, data_dir: str | Path) -> Path:
    return Path(cfg.state_dir).expanduser() if cfg.state_dir else Path(data_dir) / "commands"
