"""The node agent (``myolo-agent``): GPU, NCCL and memory-leak telemetry published to Kafka.

One asyncio process per GPU node, run by systemd. It imports ``events`` and nothing else of ours, and never
torch: the bandwidth probe runs as a subprocess, so the daemon stays small and starts fast.

``__version__`` is the version of the code actually imported: the wheel's metadata installed beside this
package (a release directory, site-packages), else the source tree's. After an upgrade the restarted agent
reports the release it runs, whatever the source tree it was first started from says.
"""

from pathlib import Path

SOURCE_VERSION = "4.0.0.dev0"  # pyproject.toml's (a test keeps them equal)
DIST = "myolotrain"


def _imported_version() -> str:
    found = sorted(Path(__file__).parent.parent.glob(f"{DIST}-*.dist-info"))
    if len(found) > 1:  # leftovers of other installs: the one whose RECORD lists this package
        found = [d for d in found if _lists_agent(d)]
    for dist_info in found[:1]:
        try:
            with (dist_info / "METADATA").open(encoding="utf-8") as meta:
                for line in meta:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break  # the headers end
        except OSError:
            pass
    return SOURCE_VERSION


def _lists_agent(dist_info: Path) -> bool:
    try:
        return "agent/__init__.py," in (dist_info / "RECORD").read_text(encoding="utf-8")
    except OSError:
        return False


__version__ = _imported_version()
