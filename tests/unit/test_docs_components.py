"""The docs name the coordinator's components as the code assembles them: every table lists each component
once, and the count written out in words is the count in ``COMPONENTS``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from myolo.coordinator.components import COMPONENTS

ROOT = Path(__file__).resolve().parents[2]
WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
]
FOLDERS = sorted(comp.__module__.split(".")[2] for comp in COMPONENTS)


def table_components(text: str) -> list[str]:
    """The first column of the component tables: rows whose first cell is a component's name, bare or linked."""
    return sorted(re.findall(r"(?m)^\| \[?`([a-z]+)`\]?(?:\([^)]*\))? \|", text))


@pytest.mark.parametrize("page", ["README.md", "docs/architecture.md"])
def test_the_page_lists_every_component_and_counts_them_right(page: str) -> None:
    text = (ROOT / page).read_text()
    listed = [n for n in table_components(text) if n in FOLDERS]
    assert sorted(set(listed)) == FOLDERS
    counts = set(re.findall(r"\b(\w+) components\b", text)) & set(WORDS)
    assert counts == {WORDS[len(COMPONENTS)]}, counts
