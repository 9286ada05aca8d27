"""Real wheels for tests, written by hand as zip files (no build backend, no network): a package's files, and
a dist-info with METADATA, WHEEL and RECORD, which is all ``pip install --target`` needs."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(out_dir: Path, version: str, *, name: str = "tinyrel", files: dict[str, str] | None = None) -> Path:
    """``<name>-<version>-py3-none-any.whl`` in ``out_dir``; ``files`` (path -> text) default to a package
    ``<name>`` whose ``__version__`` is ``version``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    body = {k: v.encode() for k, v in (files or {f"{name}/__init__.py": f"__version__ = {version!r}\n"}).items()}
    info = f"{name}-{version}.dist-info"
    body[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode()
    body[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    lines = [f"{path},{_record_hash(data)},{len(data)}" for path, data in body.items()]
    body[f"{info}/RECORD"] = ("\n".join([*lines, f"{info}/RECORD,,"]) + "\n").encode()
    path = out_dir / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in body.items():
            zf.writestr(member, data)
    return path


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
