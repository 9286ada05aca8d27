"""What ``myoloctl drift compare`` keeps of two files read in chunks: bounded per column, whatever their size.

Per column of each file: its non-empty cells counted, a uniform sample of its numbers (at most ``sample``: each
number gets a random key and the ``sample`` smallest keys are kept, merged chunk by chunk, so the sample is the
same as if the whole column had been drawn from at once), and its values counted as categories (at most
1,000 kept, the rest pooled as ``other``, as a categorical reference does). A column is numeric when every
non-empty cell of it is a number, in both files. Where the two files' rows line up (row i of A against row i
of B, up to the shorter), the largest absolute difference of each numeric column and its row, and the number
of rows whose category differs, are kept too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from myolo.coordinator.drift.offline.files import MAX_CELL_CHARS, DataFileError, as_number, is_empty
from myolo.events.payloads.external import MAX_CATEGORIES

DEFAULT_SAMPLE = 50_000
SEED = 20_240_601  # the samples are drawn the same way each run: the same files give the same statistics


@dataclass
class ColumnSketch:
    cells: int = 0  # non-empty cells
    not_numbers: int = 0
    example: str | None = None  # the first cell that is not a number (for the report)
    keys: np.ndarray = field(default_factory=lambda: np.empty(0))
    sample: np.ndarray = field(default_factory=lambda: np.empty(0))
    counts: dict[str, int] = field(default_factory=dict)
    other: int = 0

    @property
    def numeric(self) -> bool:
        return self.cells > 0 and self.not_numbers == 0


@dataclass
class FileSketch:
    name: str
    sample: int = DEFAULT_SAMPLE
    rows: int = 0
    columns: dict[str, ColumnSketch] = field(default_factory=dict)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(SEED))

    def add(self, column: str, cells: list[object]) -> tuple[np.ndarray, list[str | None]]:
        """Take a chunk of one column; returns its cells as numbers (NaN where none) and as categories."""
        col = self.columns.setdefault(column, ColumnSketch())
        numbers = np.full(len(cells), np.nan)
        names: list[str | None] = [None] * len(cells)
        for i, cell in enumerate(cells):
            if is_empty(cell):
                continue
            if isinstance(cell, dict | list):
                raise DataFileError(f"{self.name}: column {column!r}: nested values are not features")
            col.cells += 1
            name = str(cell)[:MAX_CELL_CHARS]
            names[i] = name
            if name in col.counts:
                col.counts[name] += 1
            elif len(col.counts) < MAX_CATEGORIES:
                col.counts[name] = 1
            else:
                col.other += 1
            x = as_number(cell)
            if x is None:
                col.not_numbers += 1
                col.example = col.example or name[:40]
            else:
                numbers[i] = x
        found = numbers[~np.isnan(numbers)]
        if found.size:
            keys = np.concatenate([col.keys, self.rng.random(found.size)])
            values = np.concatenate([col.sample, found])
            if keys.size > self.sample:
                keep = np.argpartition(keys, self.sample)[: self.sample]
                keys, values = keys[keep], values[keep]
            col.keys, col.sample = keys, values
        return numbers, names


@dataclass
class Aligned:
    """Row i of A against row i of B for one column, over the rows both files have."""

    rows: int = 0  # rows where both cells are non-empty
    max_abs_diff: float | None = None
    at_row: int | None = None  # 0-based data row (the header is not a row)
    mismatches: int = 0  # rows whose values differ (as categories)


def align(
    into: Aligned, first_row: int, a: tuple[np.ndarray, list[str | None]], b: tuple[np.ndarray, list[str | None]]
) -> None:
    """Fold one chunk pair (the same rows of both files) into ``into``."""
    n = min(len(a[1]), len(b[1]))
    both = [i for i in range(n) if a[1][i] is not None and b[1][i] is not None]
    into.rows += len(both)
    into.mismatches += sum(1 for i in both if a[1][i] != b[1][i])
    diff = np.abs(a[0][:n] - b[0][:n])
    diff[np.isnan(diff)] = -1.0  # a row where either cell is not a number does not count
    i = int(np.argmax(diff)) if n else 0
    if n and diff[i] >= 0 and (into.max_abs_diff is None or diff[i] > into.max_abs_diff):
        into.max_abs_diff, into.at_row = float(diff[i]), first_row + i
