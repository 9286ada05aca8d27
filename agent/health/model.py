"""The vocabulary of health: a level and a reason, and how levels combine."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Level = Literal["ok", "warn", "fail"]
RANK: dict[str, int] = {"ok": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason a GPU or node is not ``ok`` (``ok`` findings are informational and never shown)."""

    level: Level
    reason: str


def worst(levels: Iterable[str]) -> Level:
    """The most severe level; ``ok`` for none."""
    best: Level = "ok"
    for level in levels:
        if RANK[level] > RANK[best]:
            best = level  # type: ignore[assignment]
    return best


def summarise(findings: Iterable[Finding]) -> tuple[Level, list[str]]:
    """Level and reasons (fail first, then warn; duplicates dropped; ``ok`` findings left out)."""
    seen: set[str] = set()
    ranked: list[Finding] = []
    for f in findings:
        if f.level != "ok" and f.reason not in seen:
            seen.add(f.reason)
            ranked.append(f)
    ranked.sort(key=lambda f: -RANK[f.level])
    return worst(f.level for f in ranked), [f.reason for f in ranked]
