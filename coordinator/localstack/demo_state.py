"""Where ``make demo`` keeps its stack, and what it does with one an earlier run left there.

The demo secures its broker; a stack the user started plain (``myoloctl local up``) cannot be secured in place.
So the demo never shares the user's stack: it keeps its own in ``$XDG_STATE_HOME/myolo/demo`` (not
``MYOLO_STATE_DIR``, which names the user's), marked as the demo's. A stack the demo left there (running or
not) is stopped and removed before it starts afresh, and it says so. A ``--state-dir`` given by hand that holds
a stack the demo did not make is refused, never removed: it may be someone's work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from myolo.events.stackfile import STATE_FILE

MARKER = "made-by-demo"


def demo_state_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_STATE_HOME/myolo/demo``, else ``~/.local/state/myolo/demo``."""
    xdg = env.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "myolo" / "demo"


@dataclass(frozen=True)
class Plan:
    action: Literal["start", "replace", "refuse"]
    say: str


def plan(state_dir: Path) -> Plan:
    """What the demo does with ``state_dir`` before ``local up``."""
    if not (state_dir / STATE_FILE).exists():
        return Plan("start", f"the demo's stack lives in {state_dir}")
    if (state_dir / MARKER).exists():
        return Plan(
            "replace",
            f"an earlier demo left its stack in {state_dir}: stopping it and removing its data to start afresh",
        )
    return Plan(
        "refuse",
        f"demo: {state_dir} holds a stack the demo did not make (yours?); it is left alone. Give another "
        f"--state-dir, or none: the demo keeps its own stack in a directory of its own",
    )


def mark(state_dir: Path) -> None:
    """Mark ``state_dir`` as the demo's (a later demo may replace what is there)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / MARKER).write_text("this stack was started by `make demo`; the next demo replaces it\n")
