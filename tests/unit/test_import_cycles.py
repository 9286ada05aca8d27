"""No import cycle inside any of the four packages: late imports and ``TYPE_CHECKING`` blocks count too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.import_graph import import_cycles

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", ["common", "events", "agent", "coordinator", "kernels"])
def test_the_package_has_no_import_cycle(package: str) -> None:
    assert (ROOT / package).is_dir()
    assert import_cycles(ROOT / package, prefix="myolo.") == []
