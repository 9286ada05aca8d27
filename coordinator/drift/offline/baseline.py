"""The references of a model's features built here from a local file, for ``myoloctl drift baseline set``.

The coordinator's own builders are used, so a reference set from a file is the one the component would have
learned from the same values; only these bounded summaries travel, never the file.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from myolo.coordinator.drift.offline.files import read_columns
from myolo.coordinator.drift.reference import (
    DEFAULT_MAX_VALUES,
    CategoricalReference,
    NumericReference,
    categorical_reference,
    numeric_reference,
)


@dataclass(frozen=True)
class FileReferences:
    """Each column's reference, by kind, and the rows the file had."""

    rows: int
    numeric: dict[str, NumericReference]
    categorical: dict[str, CategoricalReference]

    def by_name(self) -> dict[str, tuple[str, NumericReference | CategoricalReference]]:
        """``{feature: (kind, reference)}``; the kind is the field a reference is sent under."""
        found: dict[str, tuple[str, NumericReference | CategoricalReference]] = {
            name: ("numeric", ref) for name, ref in self.numeric.items()
        }
        found.update({name: ("categorical", ref) for name, ref in self.categorical.items()})
        return dict(sorted(found.items()))


def references_from_file(
    path: Path, features: list[str] | None = None, max_values: int = DEFAULT_MAX_VALUES
) -> FileReferences:
    """Numeric columns by their values, others by category; :class:`DataFileError` or ``ValueError`` says why not."""
    columns = read_columns(path, features)
    return FileReferences(
        rows=columns.rows,
        numeric={name: numeric_reference(name, values, max_values) for name, values in columns.numeric.items()},
        categorical={
            name: categorical_reference(name, dict(Counter(cells))) for name, cells in columns.categorical.items()
        },
    )
