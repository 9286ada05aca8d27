"""No import cycle inside ``kernels/``: late imports and ``TYPE_CHECKING`` blocks count too."""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import import_cycles

ROOT = Path(__file__).resolve().parents[3]


def test_kernels_has_no_import_cycle() -> None:
    assert import_cycles(ROOT / "kernels") == []
