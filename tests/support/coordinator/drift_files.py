"""Feature files with a known shift, in each format the drift readers take, for the offline drift tests."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 20_000
SPIKE = 12_345  # a row past the first chunk: its offset must count


def columns(shift: float, spike: bool = False) -> dict[str, list]:
    rng = np.random.default_rng(1)
    x = rng.normal(0.0, 1.0, ROWS)
    y = rng.normal(5.0, 2.0, ROWS)
    c = rng.choice(["a", "b", "c"], ROWS, p=[1 / 3, 1 / 3, 1 / 3])
    if shift:
        x = x + shift
        c = np.where(rng.random(ROWS) < 0.3, "a", c)  # "a" grows from a third to a half
        y = rng.normal(5.0, 2.0, ROWS)  # the same distribution, other draws
    if spike:
        x[SPIKE] += 7.0
    return {"x": x.tolist(), "y": y.tolist(), "c": c.tolist()}


def write(path: Path, cols: dict[str, list]) -> Path:
    names = list(cols)
    if path.suffix == ".csv":
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(names)
            w.writerows(zip(*cols.values(), strict=True))
    elif path.suffix == ".jsonl":
        with path.open("w") as f:
            for row in zip(*cols.values(), strict=True):
                f.write(json.dumps(dict(zip(names, row, strict=True))) + "\n")
    else:
        pq.write_table(pa.table(cols), path, row_group_size=3000)  # many row groups, not aligned to chunks
    return path


def reference_table(rng: np.random.Generator, n: int = 500) -> dict[str, list]:
    """Two numeric features and a categorical one, as a reference file holds them."""
    return {
        "income": list(rng.normal(50.0, 10.0, n)),
        "age": [int(a) for a in rng.integers(18, 90, n)],
        "plan": list(rng.choice(["basic", "pro", "team"], n)),
    }
