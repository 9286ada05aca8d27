"""The ``[releases]`` section of ``agent.toml``: where upgrades are installed and how the agent restarts.

``dir`` must be writable by the agent (the unit lists it in ``ReadWritePaths=``) and, for the agent itself,
match the unit's ``PYTHONPATH`` (``<dir>/agent/current``). ``restart``: how the agent comes back after an
upgrade or rollback of itself: ``exit`` with code 75 for systemd to start it again (``RestartForceExitStatus``),
``exec`` to re-execute itself in place (no supervisor: the local stack), ``auto`` picks ``exit`` under systemd
($INVOCATION_ID set) and ``exec`` otherwise; under ``myolo-agent-launcher`` the agent always exits 75.

A new agent release is on trial until it commits itself (READY, a sample published, its command consumer
joined) within ``commit_timeout_s`` of a start; ``max_tries`` starts that crash, hang (no watchdog sign for
``watchdog_s``) or stay silent switch the node back to the release it last committed (``myolo.agent.launcher``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

MiB = 1 << 20
DEFAULT_DIR = "/opt/myolo/releases"


class ReleasesConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    dir: str = DEFAULT_DIR
    # versions kept per component (the current and previous ones are never pruned)
    keep: Annotated[int, msgspec.Meta(ge=2, le=100)] = 3
    # the largest wheel an upgrade may fetch (an https download is cut off past it)
    max_artifact_bytes: Annotated[int, msgspec.Meta(ge=MiB, le=1 << 40)] = 1 << 30
    fetch_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 600.0
    install_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 300.0
    restart: Literal["auto", "exec", "exit"] = "auto"
    max_tries: Annotated[int, msgspec.Meta(ge=1, le=20)] = 3
    commit_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 120.0
    # the launcher's watchdog over the agent (under systemd: the unit's WatchdogSec= when it is set)
    watchdog_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 30.0
    # the first pause before the launcher starts a crashed agent again (doubling to 60 s while it keeps failing)
    restart_delay_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 1.0
