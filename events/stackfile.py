"""Where a local stack (``myoloctl local up``) records itself on this machine, and the bootstrap it records.

A daemon told ``kafka.bootstrap = "local"``, or ``myoloctl`` given no bootstrap, uses the local stack's
(myolo.events.settings), so this much of the stack's state file is read here; the file's other contents (processes, security) and its writing belong to
the local stack (coordinator/localstack/broker/state.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

STATE_FILE = "stack.json"


def default_state_dir() -> Path:
    """MYOLO_STATE_DIR, else $XDG_STATE_HOME/myolo/local, else ~/.local/state/myolo/local."""
    if os.environ.get("MYOLO_STATE_DIR"):
        return Path(os.environ["MYOLO_STATE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "myolo" / "local"


def local_bootstrap(state_dir: Path | None = None) -> str | None:
    """The bootstrap address of the local stack, if one has been started here (else None)."""
    try:
        raw = json.loads(((state_dir or default_state_dir()) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    bootstrap = raw.get("bootstrap") if isinstance(raw, dict) else None
    return bootstrap if isinstance(bootstrap, str) and bootstrap else None
