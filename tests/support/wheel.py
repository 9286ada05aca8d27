"""A wheel of this very project with another version, built offline: the release the upgrade tests install."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_project_wheel(work: Path, version: str, *, append: dict[str, str] | None = None) -> Path:
    """``myolotrain-<version>-py3-none-any.whl`` from a copy of the source tree, built offline. ``append``:
    text added to the end of files of the copy (``agent/daemon/main.py`` -> code), to build a bad release."""
    src = work / "src"
    src.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("myolo", "common", "events", "agent", "coordinator", "kernels"):
        shutil.copytree(ROOT / name, src / name, ignore=skip)
    shutil.copy2(ROOT / "setup.py", src / "setup.py")
    for path, text in (append or {}).items():
        with open(src / path, "a") as f:
            f.write("\n" + text)
    shutil.copy2(ROOT / "README.md", src / "README.md")
    pyproject, n = re.subn(r'(?m)^version = ".*"$', f'version = "{version}"', (ROOT / "pyproject.toml").read_text())
    assert n == 1, "pyproject.toml should have one version line"
    (src / "pyproject.toml").write_text(pyproject)
    out = work / "dist"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [wheel] = out.glob("myolotrain-*.whl")
    assert wheel.name == f"myolotrain-{version}-py3-none-any.whl"
    return wheel
