"""The vocabulary of health: a level and a reason, and how levels combine."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from myolo.events.payloads.common import HEALTH_RANK, Health, worst_health


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason a GPU or node is not ``ok`` (``ok`` findings are informational and never shown)."""

    level: Health
    reason: str


def summarise(findings: Iterable[Finding]) -> tuple[Health, list[str]]:
    """Level and reasons (fail first, then warn; duplicates dropped; ``ok`` findings left out)."""
    seen: set[str] = set()
    ranked: list[Finding] = []
    for f in findings:
        if f.level != "ok" and f.reason not in seen:
            seen.add(f.reason)
            ranked.append(f)
    ranked.sort(key=lambda f: -HEALTH_RANK[f.level])
    return worst_health(f.level for f in ranked), [f.reason for f in ranked]
