"""How ``myoloctl``'s modules hold together: one client builds the API's paths, one module fails, no command
reaches into another's private helpers, and the client does not load the local stack."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from myolo.coordinator.cli import exits
from myolo.coordinator.cli.main import app

CLI = Path(__file__).resolve().parents[4] / "coordinator" / "cli"
MODULES = sorted(CLI.glob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _docstrings(tree: ast.Module) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
    return {
        id(n.body[0].value)
        for n in nodes
        if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
    }


def test_only_the_client_writes_an_api_path() -> None:
    found = []
    for path in MODULES:
        if path.name == "client.py":
            continue
        tree = _tree(path)
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            literal = isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            if literal and "/v1/" in node.value:
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], "build API paths in coordinator/cli/client.py only"


def test_fail_is_defined_once() -> None:
    defined = [
        f"{path.name}:{node.lineno}"
        for path in MODULES
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef) and node.name in ("fail", "_fail")
    ]
    assert defined == [f"exits.py:{_line_of('def fail')}"]


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate((CLI / "exits.py").read_text().splitlines(), 1) if line.startswith(text))


def test_no_command_imports_another_ones_private_names() -> None:
    private = [
        f"{path.name}:{node.lineno} {node.module}.{alias.name}"
        for path in MODULES
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("myolo.coordinator.cli.")
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []


def test_the_client_does_not_load_the_local_stack() -> None:
    code = (
        "import sys, myolo.coordinator.cli.client\n"
        "print(sorted(m for m in sys.modules if m.startswith(('myolo.coordinator.localstack', 'aiohttp'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_failure_has_one_of_the_documented_codes() -> None:
    with pytest.raises(ValueError, match="not one of"):
        exits.CliError("x", 3)
    assert exits.exit_for(exits.CliError("bad [input]", exits.REFUSED)).exit_code == exits.REFUSED


def test_verify_watermark_exits_with_the_codes_of_the_help_table() -> None:
    text = CliRunner().invoke(app, ["registry", "verify-watermark", "--help"], env={"COLUMNS": "200"}).output
    assert "Exit 0 when marked, 1 when not" in text and " 3 " not in text
    assert "0 done; 1 a check or a gate failed" in exits.HELP
