"""Every action of the contract has a sender in the coordinator: some component builds its arguments' Struct
(``issue(node, DrainArgs(...))``). An action nobody sends is dead weight in the contract and in every agent."""

from __future__ import annotations

import ast
from pathlib import Path

from myolo.events.payloads.commands import ACTIONS

COORDINATOR = Path(__file__).resolve().parents[4] / "coordinator"


def constructed_names() -> dict[str, set[str]]:
    """Per name called anywhere in the coordinator outside ``commands/``: the modules that call it."""
    found: dict[str, set[str]] = {}
    for path in COORDINATOR.rglob("*.py"):
        if "commands" in path.relative_to(COORDINATOR).parts[:1]:
            continue  # the sender itself, not a send site
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name is not None:
                    found.setdefault(name, set()).add(str(path.relative_to(COORDINATOR)))
    return found


def test_every_action_has_a_sender_in_the_coordinator() -> None:
    calls = constructed_names()
    unsent = sorted(c.action for c in ACTIONS if c.__name__ not in calls)
    assert unsent == [], f"no coordinator code builds the args of {unsent}: add a sender or remove the action"
