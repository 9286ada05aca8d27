"""Import cycles inside a package, read from its source with ``ast``: nothing is imported or run.

Every ``import`` counts, wherever it stands: at the top of a module, inside a function (a "late" import that
dodges a cycle at load time still ties the two modules together) and under ``if TYPE_CHECKING:``. A package's
``__init__`` is an edge only when a module names it (``from pkg import __version__``), not because Python
runs it on the way to a submodule: otherwise every package that re-exports its modules would be a cycle.

Use: ``assert not import_cycles(ROOT / "agent")``; each cycle is a list of module names.
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(path: Path, root: Path, prefix: str = "") -> str:
    """``root/agent/daemon/main.py`` -> ``<prefix>agent.daemon.main``; a package's ``__init__.py`` is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return prefix + ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """The absolute modules a file imports (``import a.b``, ``from a.b import c`` -> ``a.b``), wherever the
    import stands; relative imports are left out."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def import_graph(package_dir: Path, prefix: str = "") -> dict[str, set[str]]:
    """Each module of the package (under ``package_dir``, imported as ``<prefix><its folder>``) -> the modules of
    the same package it imports."""
    root = package_dir.parent
    files = {module_name(p, root, prefix): p for p in sorted(package_dir.rglob("*.py"))}
    return {name: _imports(name, path, files) for name, path in files.items()}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, is_package, node.module, node.level)
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {m for m in out if m in modules and m != name}


def _absolute(name: str, is_package: bool, module: str | None, level: int) -> str:
    """The absolute module of ``from <level dots><module> import ...`` written in module ``name``."""
    if level == 0:
        return module or ""
    package = name.split(".") if is_package else name.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, module] if module else base)


def import_cycles(package_dir: Path, prefix: str = "") -> list[list[str]]:
    """The package's import cycles: each strongly connected set of two or more modules, sorted."""
    return sorted(sorted(c) for c in _strongly_connected(import_graph(package_dir, prefix)) if len(c) > 1)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit however deep the chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            nxt = next(successors, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(component)
    return found
