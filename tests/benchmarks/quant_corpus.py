"""The quantization benchmark's text: Python's standard library sources as bytes, split by file.

Every machine with Python has them. Files (site-packages left out) are sorted by path and assigned by a hash
of the path: 1 in 20 to the held-out set, 1 in 20 to the calibration set, the rest to training, so the three
share no file and the split is the same on every run. Each set is one flat uint16 token file of bytes (the
model is byte-level: vocabulary 256), files separated by a blank line.
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SPLITS = ("train", "calib", "eval")


@dataclass(frozen=True)
class Corpus:
    train: Path
    calib: Path
    eval: Path
    files: dict[str, int]  # split -> files in it
    sha256: str  # of the three token files, in order: what the results name


def split_of(relative: str) -> str:
    bucket = int(hashlib.sha256(relative.encode()).hexdigest(), 16) % 20
    return "eval" if bucket == 0 else "calib" if bucket == 1 else "train"


def build(out: Path) -> Corpus:
    """Write (or reuse) ``<out>/{train,calib,eval}.bin``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    sources = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    paths = {s: out / f"{s}.bin" for s in SPLITS}
    counts = dict.fromkeys(SPLITS, 0)
    for src in sources:
        counts[split_of(str(src.relative_to(root)))] += 1
    if not all(p.exists() for p in paths.values()):
        out.mkdir(parents=True, exist_ok=True)
        chunks: dict[str, list[bytes]] = {s: [] for s in SPLITS}
        for src in sources:
            chunks[split_of(str(src.relative_to(root)))].append(src.read_bytes() + b"\n\n")
        for split, parts in chunks.items():
            tokens = np.frombuffer(b"".join(parts), dtype=np.uint8).astype(np.uint16)
            tmp = paths[split].with_suffix(".tmp")
            tmp.write_bytes(tokens.tobytes())
            tmp.replace(paths[split])
    digest = hashlib.sha256()
    for split in SPLITS:
        digest.update(hashlib.sha256(paths[split].read_bytes()).digest())
    return Corpus(paths["train"], paths["calib"], paths["eval"], counts, digest.hexdigest())
