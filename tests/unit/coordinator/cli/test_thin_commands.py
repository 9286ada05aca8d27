"""A command is parsing, one call and rendering: the work it calls lives in the package it belongs to.

Two checkable halves of that rule (docs/cli.md, "Where a command's logic lives"): the packages never import the
terminal libraries, and the command modules never import the libraries that computing over files, archives or
the bus takes (which is how logic left behind in a command shows itself).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.import_graph import imported_modules

ROOT = Path(__file__).resolve().parents[4]
CLI = ROOT / "coordinator" / "cli"
TERMINAL = ("typer", "rich", "click")
# The whole of these is logic, never the terminal's: a command needing one calls a package that uses it.
LOGIC_LIBRARIES = ("numpy", "pyarrow", "csv", "math", "statistics", "tarfile", "gzip", "zipfile", "html", "hashlib")
TRANSPORT = ("client.py", "transport.py")  # the API client is the CLI's own package for HTTP, not a command


def _top(name: str) -> str:
    return name.split(".")[0]


def test_only_the_command_lines_import_the_terminal_libraries() -> None:
    allowed = {CLI, ROOT / "coordinator" / "cli_daemon.py"}
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for package in ("coordinator", "events")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path not in allowed and CLI not in path.parents
        for name in sorted(imported_modules(path))
        if _top(name) in TERMINAL
    ]
    assert found == [], "parse and render in coordinator/cli/; compute in the package the work belongs to"


def test_command_modules_import_no_library_of_the_logic() -> None:
    found = [
        f"{path.name}: {name}"
        for path in sorted(CLI.glob("*.py"))
        if path.name not in TRANSPORT
        for name in sorted(imported_modules(path))
        if _top(name) in LOGIC_LIBRARIES or (_top(name) == "aiokafka" and name != "aiokafka.errors")
    ]
    assert found == [], "move the computation into its package (drift/offline, planning, backup, events.bus, ...)"
