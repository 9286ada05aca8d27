"""A real coordinator built without a broker (nothing here connects), for tests of its assembly and logic."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from myolo.common.clock import SimClock
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.config import load_coordinator_config
from myolo.coordinator.core.component import Component
from myolo.coordinator.core.coordinator import Coordinator
from tests.support.api_auth import shared
from tests.support.helpers import write_key


def offline_coordinator(
    tmp_path: Path,
    clock: SimClock | None = None,
    producers=None,
    components: Sequence[type[Component]] | None = None,
    **env: str,
) -> Coordinator:
    """``producers`` (see recorder.py) record what the coordinator writes; without them, writes would fail.
    ``components`` replace the real list (for a component added from outside); ``env`` sets config keys."""
    key = write_key(tmp_path / "coordinator.key", "11" * 32)
    base = {
        "MYOLO_SIGNING_KEY_FILE": str(key),
        "MYOLO_INSTANCE_ID": "me",
        "MYOLO_KAFKA_BOOTSTRAP": "127.0.0.1:1",
        "MYOLO_API_TOKENS_FILE": str(shared()[0]),
    }
    chosen = COMPONENTS if components is None else tuple(components)
    cfg = load_coordinator_config(None, components=chosen, env={**base, **env})
    return Coordinator(cfg, chosen, clock or SimClock(), producers=producers)
