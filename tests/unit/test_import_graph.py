"""The import-cycle checker finds the cycles it claims to find."""

from __future__ import annotations

from pathlib import Path

from tests.support.import_graph import import_cycles, import_graph


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in {"__init__.py": "", **files}.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "pkg"


def test_a_late_import_inside_a_function_is_still_a_cycle(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {"a.py": "from pkg.b import f\n", "b.py": "def f():\n    from pkg import a\n"})
    assert import_cycles(pkg) == [["pkg.a", "pkg.b"]]


def test_a_type_checking_import_is_still_a_cycle(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "a.py": "import pkg.b\n",
            "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n",
        },
    )
    assert import_cycles(pkg) == [["pkg.a", "pkg.b"]]


def test_relative_imports_and_longer_cycles_through_subpackages(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "sub/__init__.py": "from .x import X\n",
            "sub/x.py": "from ..c import C\n",
            "c.py": "from . import d\n",
            "d.py": "from pkg.sub import X\n",
            "e.py": "from pkg import c\n",  # imports into the cycle but is not part of it
        },
    )
    assert import_cycles(pkg) == [["pkg.c", "pkg.d", "pkg.sub", "pkg.sub.x"]]
    assert import_graph(pkg)["pkg.e"] == {"pkg.c"}


def test_a_package_that_re_exports_its_modules_is_no_cycle(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "sub/__init__.py": "from pkg.sub.x import X\n",
            "sub/x.py": "import os\nfrom pkg.sub.y import Y\n",
            "sub/y.py": "",
        },
    )
    assert import_cycles(pkg) == []
    assert import_graph(pkg)["pkg.sub.x"] == {"pkg.sub.y"}  # modules outside the package are left out
