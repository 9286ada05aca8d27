"""Components reach each other only through their interfaces, read from the source (tests/support/import_graph.py):
a component's folder imports from another component's folder only its ``interface`` module, the core imports
no component, and only the daemon's callers import the composition root (``coordinator/components.py``)."""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.assembly import members
from tests.support.import_graph import import_graph, module_name

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


# Records stay with the component that writes them: an interface answers with its own small values.


def is_record_type(obj: object) -> bool:
    """A class a component writes to its state topic: defined in a ``records`` module."""
    return isinstance(obj, type) and (obj.__module__ or "").endswith(".records")


def is_owned_data(obj: object) -> bool:
    """What an interface must not hand on: a record, or a class or function of a records or manifest module
    (its parsers and loaders). Errors are what callers catch, and may cross."""
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return False
    module = getattr(obj, "__module__", None) or ""
    return (inspect.isclass(obj) or inspect.isfunction(obj)) and module.endswith((".records", ".manifest"))


def mentioned(hint: object) -> Iterator[object]:
    """``hint`` and every type inside it (``tuple[X, ...] | None`` mentions tuple, X and None)."""
    yield hint
    for arg in typing.get_args(hint):
        yield from mentioned(arg)


def records_in_signatures(protocol: type) -> dict[str, set[str]]:
    """Each member of ``protocol`` whose parameters or return mention a record type, with those types."""
    found: dict[str, set[str]] = {}
    for name in members(protocol):
        hints = typing.get_type_hints(getattr(protocol, name))
        names = {t.__name__ for h in hints.values() for t in mentioned(h) if is_record_type(t)}  # type: ignore[attr-defined]
        if names:
            found[name] = names
    return found


def reexported(module: ModuleType) -> set[str]:
    return {name for name, obj in vars(module).items() if is_owned_data(obj)}


def test_no_interface_protocol_hands_out_a_record() -> None:
    crossing = {
        interface.__name__: set(found)
        for comp in COMPONENTS
        for interface in comp.provides
        if (found := records_in_signatures(interface))
    }
    assert crossing == {}


def test_no_interface_module_re_exports_a_record_a_parser_or_a_loader() -> None:
    found = {
        name: names
        for name in sorted(FOLDERS)
        if (names := reexported(importlib.import_module(f"myolo.coordinator.{name}.interface")))
    }
    assert found == {}


def test_the_rule_sees_a_record_crossing_an_interface() -> None:
    records = ModuleType("myolo.coordinator.fake.records")
    answers = ModuleType("myolo.coordinator.fake.interface")
    record = type("FakeRecord", (), {"__module__": records.__name__})
    answer = type("FakeAnswer", (), {"__module__": answers.__name__})
    error = type("FakeError", (ValueError,), {"__module__": records.__name__})

    class Leaky(typing.Protocol):
        def one(self, name: str) -> object: ...

        def many(self, names: tuple[object, ...]) -> int: ...

        def fine(self, name: str) -> object: ...

    # the annotations as objects: the fake types are local, out of reach of postponed evaluation
    Leaky.one.__annotations__ = {"name": str, "return": record | None}
    Leaky.many.__annotations__ = {"names": tuple[record, ...], "return": int}  # type: ignore[valid-type]
    Leaky.fine.__annotations__ = {"name": str, "return": answer}
    assert records_in_signatures(Leaky) == {"one": {"FakeRecord"}, "many": {"FakeRecord"}}
    answers.FakeRecord, answers.FakeAnswer, answers.FakeError = record, answer, error  # type: ignore[attr-defined]
    assert reexported(answers) == {"FakeRecord"}


def interface_imports(package_dir: Path, prefix: str = "myolo.") -> dict[str, set[tuple[str, str]]]:
    """Each component module -> the (interface module, name) pairs it imports from another component's interface,
    read from the source with ``ast`` (imports inside functions and under ``TYPE_CHECKING`` count too)."""
    found: dict[str, set[tuple[str, str]]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        module = module_name(path, package_dir.parent, prefix)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            source = node.module
            if source.endswith(".interface") and folder(source) not in (None, folder(module)) and folder(module):
                found.setdefault(module, set()).update((source, a.name) for a in node.names)
    return found


def records_imported(imports: dict[str, set[tuple[str, str]]]) -> dict[str, set[str]]:
    """Of ``imports``, the names that are another component's records, parsers or loaders."""
    out: dict[str, set[str]] = {}
    for module, pairs in imports.items():
        names = {name for source, name in pairs if is_owned_data(getattr(importlib.import_module(source), name, None))}
        if names:
            out[module] = names
    return out


def test_no_component_imports_a_record_through_another_components_interface() -> None:
    imports = {m: p for m, p in interface_imports(ROOT / "coordinator").items() if folder(m) in FOLDERS}
    assert imports  # the rule reads real imports
    assert records_imported(imports) == {}


def test_the_rule_sees_a_record_imported_through_an_interface(tmp_path: Path) -> None:
    pkg = tmp_path / "coordinator"
    (pkg / "jobs").mkdir(parents=True)
    (pkg / "jobs" / "component.py").write_text(
        "def late():\n    from myolo.coordinator.cordons.interface import AutoCordons, CordonRecord\n"
    )
    (pkg / "jobs" / "own.py").write_text("from myolo.coordinator.jobs.interface import JobsAPI\n")
    found = interface_imports(pkg)
    assert found == {
        "myolo.coordinator.jobs.component": {
            ("myolo.coordinator.cordons.interface", "AutoCordons"),
            ("myolo.coordinator.cordons.interface", "CordonRecord"),
        }
    }
    cordons = importlib.import_module("myolo.coordinator.cordons.interface")
    record = type("CordonRecord", (), {"__module__": "myolo.coordinator.cordons.records"})
    cordons.CordonRecord = record
    try:
        assert records_imported(found) == {"myolo.coordinator.jobs.component": {"CordonRecord"}}
    finally:
        delattr(cordons, "CordonRecord")


def test_a_component_provides_only_what_its_interface_module_defines() -> None:
    """``provides`` is what other components may ``need``: the Protocols of its ``interface.py``. What only its
    own routes ask (records, writes) is a Protocol of its ``api.py``, which the component implements in full."""
    elsewhere = sorted(
        f"{comp.name}: {interface.__module__}.{interface.__name__}"
        for comp in COMPONENTS
        for interface in comp.provides
        if interface.__module__ != f"myolo.coordinator.{folder(comp.__module__)}.interface"
    )
    assert elsewhere == []
    lacking: dict[str, list[str]] = {}
    for comp in COMPONENTS:
        name = folder(comp.__module__)
        if not (ROOT / "coordinator" / f"{name}" / "api.py").exists():
            continue
        api = importlib.import_module(f"myolo.coordinator.{name}.api")
        for proto in vars(api).values():
            ours = getattr(proto, "_is_protocol", False) and proto.__module__ == api.__name__
            if ours and (missing := [m for m in members(proto) if not hasattr(comp, m)]):
                lacking[f"{comp.name}: {proto.__name__}"] = missing
    assert lacking == {}
