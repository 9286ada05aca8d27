"""``myolo-agent-launcher [agent run options]``: the agent's options pass through to ``myolo-agent run``.

It reads only ``[releases]`` of the agent's config (``--config``/``-c``, else /etc/myolo/agent.toml when it
exists; ``MYOLO_RELEASES_*`` override it) and imports nothing of the daemon: it comes from the base install,
so a release that cannot even import is still taken back.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec

from myolo.agent.launcher.supervise import Launcher
from myolo.agent.releases.config import ReleasesConfig
from myolo.common.config import load_config
from myolo.common.errors import ConfigError
from myolo.common.logs import configure_logging

DEFAULT_CONFIG = Path("/etc/myolo/agent.toml")
USAGE = """usage: myolo-agent-launcher [myolo-agent run options]

Start the node agent (`python -m myolo.agent run` with the given options) from its current release, restart it
when it stops for an upgrade or crashes, and switch back to the last committed release when a new one does
not commit itself (READY, a sample published, its command consumer joined) within releases.max_tries starts
of releases.commit_timeout_s each. This is what the systemd unit runs; see docs/agent.md.
"""


class _View(msgspec.Struct, kw_only=True):
    """The part of agent.toml the launcher reads; the rest is the agent's to check."""

    releases: ReleasesConfig = msgspec.field(default_factory=ReleasesConfig)
    log_level: str = "info"


def config_path(args: Sequence[str]) -> Path | None:
    """The ``--config``/``-c`` the agent will be given, else the default file when it exists."""
    for i, arg in enumerate(args):
        if arg in ("--config", "-c") and i + 1 < len(args):
            return Path(args[i + 1])
        if arg.startswith("--config="):
            return Path(arg.split("=", 1)[1])
    return DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    try:
        view = load_config(config_path(args), _View)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    json = "--log-text" not in args and ("--log-json" in args or not sys.stderr.isatty())
    configure_logging(view.log_level, json=json)
    return Launcher(view.releases, args).run()
