"""``myolo.__version__`` is the version of the code imported: a release's wheel metadata, else the source's."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import myolo
from myolo.agent.releases.base import interpreter_version
from myolo.agent.releases.install import pip_install
from tests.support.agent.wheels import build_wheel

ROOT = Path(__file__).resolve().parents[4]


def imported_version(path: Path) -> tuple[str, str]:
    """``myolo.__version__`` and ``myolo.__file__`` in a fresh interpreter with ``path`` first on its path."""
    proc = subprocess.run(
        [sys.executable, "-P", "-c", "import myolo; print(myolo.__version__); print(myolo.__file__)"],
        env={**os.environ, "PYTHONPATH": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert proc.returncode == 0, proc.stderr
    version, file = proc.stdout.split()
    return version, file


def test_the_source_trees_version_is_pyprojects() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == myolo.SOURCE_VERSION
    assert imported_version(ROOT) == (project["version"], str(ROOT / "myolo" / "__init__.py"))


async def test_an_installed_wheel_reports_its_own_version_not_the_sources(tmp_path) -> None:
    init = (ROOT / "myolo" / "__init__.py").read_text()  # the real module, with the source's version in it
    wheel = build_wheel(tmp_path / "dist", "9.9.1.dev0", name="myolotrain", files={"myolo/__init__.py": init})
    target = tmp_path / "release"
    await pip_install([sys.executable], wheel, target, 120)  # as the agent installs a release
    assert imported_version(target) == ("9.9.1.dev0", str(target / "myolo" / "__init__.py"))


async def test_the_trainers_base_version_is_what_its_interpreter_imports(tmp_path) -> None:
    wheel = build_wheel(tmp_path / "dist", "7.7.7", name="myolotrain", files={"myolo/__init__.py": ""})
    target = tmp_path / "trainer-venv"
    await pip_install([sys.executable], wheel, target, 120)  # as the agent installs a release
    assert await interpreter_version([sys.executable], {**os.environ, "PYTHONPATH": str(target)}) == "7.7.7"
    assert await interpreter_version([sys.executable, "-S"], {"PYTHONPATH": ""}) is None  # no such distribution
    assert await interpreter_version([str(tmp_path / "no-python")], {}) is None
