"""Each package imports only the packages docs/architecture.md allows it: common nothing of ours, the event
contract only common, and agent, coordinator and the trainer only those two (never each other). Read from the
source with ``ast``, late and ``TYPE_CHECKING`` imports included."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.import_graph import imported_modules

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {
    "common": set(),
    "events": {"common"},
    "agent": {"common", "events"},
    "coordinator": {"common", "events"},
    "kernels": {"common", "events"},
}


def reached(package_dir: Path, root: Path = ROOT) -> set[str]:
    """``file -> myolo.<package>`` for every import of another of our packages under ``package_dir``."""
    return {
        f"{path.relative_to(root)} -> myolo.{parts[1]}"
        for path in sorted(package_dir.rglob("*.py"))
        for parts in (name.split(".") for name in imported_modules(path))
        if parts[0] == "myolo" and len(parts) > 1 and parts[1] != package_dir.name
    }


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_packages_below_it(package: str) -> None:
    wrong = sorted(r for r in reached(ROOT / package) if r.rsplit(".", 1)[1] not in ALLOWED[package])
    assert wrong == []


def test_the_rule_sees_a_forbidden_import(tmp_path: Path) -> None:
    pkg = tmp_path / "agent"
    pkg.mkdir()
    (pkg / "x.py").write_text("def f():\n    from myolo.coordinator.jobs import interface\n")
    assert {r.rsplit(" -> ", 1)[1] for r in reached(pkg, tmp_path)} == {"myolo.coordinator"}
