"""Components reach each other only through their interfaces, read from the source (tests/support/import_graph.py):
a component's folder imports from another component's folder only its ``interface`` module, the core imports
no component, and only the daemon's callers import the composition root (``coordinator/components.py``)."""

from __future__ import annotations

from pathlib import Path

from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.assembly import members
from tests.support.import_graph import import_graph

ROOT = Path(__file__).resolve().parents[3]
GRAPH = import_graph(ROOT / "coordinator", prefix="myolo.")
FOLDERS = {comp.__module__.split(".")[2] for comp in COMPONENTS}  # myolo.coordinator.<folder>.component


def folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 else None


def test_every_component_lives_in_a_folder_with_an_interface() -> None:
    assert len(FOLDERS) == len(COMPONENTS)
    for name in FOLDERS:
        assert f"myolo.coordinator.{name}.interface" in GRAPH, name


def test_a_component_imports_from_another_only_its_interface() -> None:
    crossing = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if folder(module) in FOLDERS
        for target in targets
        if folder(target) in FOLDERS
        and folder(target) != folder(module)
        and target != f"myolo.coordinator.{folder(target)}.interface"
    )
    assert crossing == []


def test_the_core_imports_no_component_and_not_the_composition_root() -> None:
    core = {
        m: t for m, t in GRAPH.items() if m.startswith("myolo.coordinator.core.") or m == "myolo.coordinator.config"
    }
    assert core  # the rule reads real modules
    reached = sorted(f"{m} -> {t}" for m, ts in core.items() for t in ts if folder(t) in FOLDERS)
    assert reached == []
    assert [m for m, ts in core.items() if "myolo.coordinator.components" in ts] == []


def test_no_interface_hands_out_a_list_or_a_dict() -> None:
    """What a Protocol returns is the caller's to read, not to change: tuples and frozen views, never a list or
    a dict the caller could edit in place."""
    editable = sorted(
        f"{interface.__name__}.{name} -> {returns}"
        for comp in COMPONENTS
        for interface in comp.provides
        for name in members(interface)
        if (returns := str(getattr(getattr(interface, name), "__annotations__", {}).get("return", "")))
        and returns.startswith(("list[", "dict[", "set["))
    )
    assert editable == []


def test_the_rule_sees_a_crossing_import(tmp_path: Path) -> None:
    pkg = tmp_path / "coordinator"
    for name in ("fleet", "jobs"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
        (pkg / name / "interface.py").write_text("")
        (pkg / name / "model.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "jobs" / "component.py").write_text(
        "from myolo.coordinator.fleet.model import NodeState\nfrom myolo.coordinator.fleet import interface\n"
    )
    graph = import_graph(pkg, prefix="myolo.")
    assert graph["myolo.coordinator.jobs.component"] == {
        "myolo.coordinator.fleet.model",
        "myolo.coordinator.fleet.interface",
    }
