"""The wheel installs one top-level package, ``myolo``: no generic name (``events``, ``kernels``...) that could
shadow, or be shadowed by, another distribution; its console scripts and data files come along."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path
from zipfile import ZipFile

from tests.support.wheel import build_project_wheel

VERSION = "4.0.1.dev7"
PROBE = """
import importlib.util, json, myolo
print(json.dumps({
    "version": myolo.__version__,
    "file": myolo.__file__,
    "codec": importlib.util.find_spec("myolo.events.codec") is not None,
    "trainer": importlib.util.find_spec("myolo.kernels.cli.worker") is not None,
    "bare": [n for n in ("common", "events", "agent", "coordinator", "kernels") if importlib.util.find_spec(n)],
}))
"""


def test_the_wheel_installs_only_myolo_in_an_empty_venv(tmp_path: Path) -> None:
    import json

    wheel = build_project_wheel(tmp_path / "build", VERSION)
    with ZipFile(wheel) as z:
        names = z.namelist()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"myolo"}
    assert "myolo/common/metrics/mapping.toml" in names  # package data under the namespace too
    assert "myolo/coordinator/ui/static/index.html" in names or any(
        n.startswith("myolo/coordinator/ui/static/") for n in names
    )

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index"]
    proc = subprocess.run([*install, str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]

    [site] = (env_dir / "lib").glob("python3*/site-packages")
    top = sorted(
        p.name for p in site.iterdir() if not p.name.endswith((".dist-info", ".pth")) and p.name != "__pycache__"
    )
    assert top == ["myolo"]
    scripts = {p.name for p in (env_dir / "bin").iterdir()}
    assert {"myoloctl", "myolo-agent", "myolo-agent-launcher", "myolo-coordinator", "myolo-train"} <= scripts
    assert "from myolo.coordinator.cli.main import app" in (env_dir / "bin" / "myoloctl").read_text()

    out = subprocess.run([str(python), "-I", "-c", PROBE], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout)
    assert found["version"] == VERSION  # the installed metadata's, not the source tree's
    assert Path(found["file"]).is_relative_to(site)
    assert found["codec"] and found["trainer"]
    assert found["bare"] == []


def test_in_the_checkouts_root_another_kernels_package_wins(tmp_path: Path) -> None:
    """In the repository's root (the working directory of the tests and tools) the top-level folders shadow no
    other distribution: they have no ``__init__.py``, so a real ``kernels`` package on the path is the one
    imported, and ours stay reachable as ``myolo.kernels``."""
    import os

    root = Path(__file__).resolve().parents[2]
    for folder in ("common", "events", "agent", "coordinator", "kernels"):
        assert not (root / folder / "__init__.py").exists(), folder
    other = tmp_path / "site" / "kernels"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("CUDAProperties = 'theirs'\n")
    code = "from kernels import CUDAProperties; import myolo.kernels.cli.worker as w; print(CUDAProperties, w.__name__)"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["theirs", "myolo.kernels.cli.worker"]
