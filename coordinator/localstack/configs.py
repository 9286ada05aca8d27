"""Config files for the local stack's processes, and the one signing key they share.

Each coordinator and agent gets its own directory under the stack state dir with a TOML config, its log and
(for agents) its spool, ledger and control socket, so a stack is inspectable and removable as one folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from myolo.common.errors import ConfigError
from myolo.common.keys import ensure_ed25519, public_path
from myolo.coordinator.api.tokens import ensure_local

KEY_FILE = "signing.key"


def signing_key(state_dir: Path) -> Path:
    """The coordinators' Ed25519 key (mode 0600) with its public half beside it (``signing.key.pub``, what the
    agents trust), created on first use. A stack made before Ed25519 had an HMAC secret there: replaced."""
    path = state_dir / KEY_FILE
    try:
        ensure_ed25519(path)
    except ConfigError:
        path.unlink()
        ensure_ed25519(path)
    return path


def toml(doc: dict[str, Any]) -> str:
    """The small TOML subset our configs need: scalars and lists of strings, one level of sections."""
    lines: list[str] = []
    tables = {k: v for k, v in doc.items() if isinstance(v, dict)}
    for key, value in doc.items():
        if not isinstance(value, dict):
            lines.append(f"{key} = {_value(value)}")
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [f"{k} = {_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string uses the same escapes
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def coordinator_config(name: str, workdir: Path, *, bootstrap: str, api_port: int, key_file: Path) -> dict[str, Any]:
    return {
        "instance_id": name,
        "status_file": str(workdir / "status.json"),
        # the API's tokens: one admin token, kept in <state dir>/api/admin.token for myoloctl (coordinator/cli/auth.py)
        "api": {"host": "127.0.0.1", "port": api_port, "tokens_file": str(ensure_local(key_file.parent))},
        "signing": {"key_file": str(key_file)},
        "kafka": {"bootstrap": bootstrap, "client_id": name},
        # a job grows back within seconds of capacity returning, so the loop can be watched on a laptop
        "jobs": {"grow_cooldown_s": 10.0},
        # every node of the stack is this machine: quantized models go beside the stack's state
        "quantize": {"artifact_dir": str(key_file.parent / "models" / "quantized")},
    }


def agent_env(key_file: Path) -> dict[str, str]:
    """The agent obeys commands signed by the stack's coordinators (it holds their public key only). Given as
    MYOLO_* overrides (not in the file) so an agent build without a ``[commands]`` section still starts: unknown
    variables are ignored."""
    return {"MYOLO_COMMANDS_ENABLED": "true", "MYOLO_COMMANDS_KEY_FILES": json.dumps([str(public_path(key_file))])}


def agent_config(
    node_id: str, workdir: Path, *, bootstrap: str, gpus: int, health_port: int, key_file: Path
) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "simulate_gpus": gpus,
        "data_dir": str(workdir),
        "control_socket": str(workdir / "agent.sock"),
        "health": {"host": "127.0.0.1", "port": health_port},
        "leak": {"report_interval_s": 10.0},  # a leak trend within seconds, for the demo
        "kafka": {"bootstrap": bootstrap, "client_id": node_id},
        # upgrades install under the agent's own directory; its launcher starts it again after one. A local
        # broker answers within milliseconds: a start that has not committed in 30 s will not.
        "releases": {"dir": str(workdir / "releases"), "commit_timeout_s": 30.0, "watchdog_s": 10.0},
    }
