"""docs/trainer.md has a row for every trainer job field, naming its flag and manifest key: adding a field to
a section fails here until it is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from myolo.coordinator.jobs.manifest import manifest_field
from myolo.events.payloads.trainer_fields import TrainerField, trainer_fields
from myolo.events.payloads.trainer_job import TrainerJob

DOC = Path(__file__).resolve().parents[2] / "docs" / "trainer.md"


def rows() -> dict[str, str]:
    """The tables' rows by their first cell, the field's path (``optimizer.lr``)."""
    out: dict[str, str] = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]  # "a \| b" is one cell
        if line.startswith("| `") and len(cells) == 5:
            out[cells[0].strip("`")] = line
    return out


@pytest.mark.parametrize("field", trainer_fields(TrainerJob), ids=lambda f: f.path)
def test_every_field_has_its_row_with_flag_and_manifest_key(field: TrainerField) -> None:
    row = rows().get(field.path)
    assert row is not None, f"docs/trainer.md has no row for {field.path}: add it to the {field.section} table"
    assert f"`{field.flag}`" in row and f"`{manifest_field(field.path)}`" in row, row


def test_no_row_names_a_field_that_is_gone() -> None:
    fields = {f.path for f in trainer_fields(TrainerJob)}
    assert set(rows()) <= fields, set(rows()) - fields
