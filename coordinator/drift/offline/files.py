"""Read a reference data set (Parquet, CSV or JSON Lines) into columns, for ``myoloctl drift baseline set``.

A column whose every non-empty value is a number is numeric; any other column is categorical (its values as
strings). Empty cells, nulls and NaN are skipped, not counted as a category. The file is hostile input like any
other: bounded in bytes, rows and columns, and each error names the file, the row or column, and the fix.
Parquet needs ``pyarrow`` (the ``parquet`` extra); CSV and JSON Lines need nothing more.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILE_BYTES = 1 << 30
MAX_ROWS = 5_000_000
MAX_COLUMNS = 256
MAX_CELL_CHARS = 256
MAX_LINE_BYTES = 1 << 20  # one JSON Lines row


class DataFileError(ValueError):
    """The file cannot serve as a reference; the message names where and what to do."""


@dataclass
class Columns:
    """Each feature's values: numbers for numeric features, strings for categorical ones."""

    numeric: dict[str, list[float]] = field(default_factory=dict)
    categorical: dict[str, list[str]] = field(default_factory=dict)
    rows: int = 0

    def names(self) -> list[str]:
        return sorted([*self.numeric, *self.categorical])


def read_columns(path: Path, only: list[str] | None = None) -> Columns:
    """The file's columns (``only``: just those, each of which must exist), typed as the module says."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise DataFileError(f"--from {path}: cannot read it: {exc.strerror or exc}") from None
    if size > MAX_FILE_BYTES:
        raise DataFileError(f"--from {path}: {size} bytes, over the {MAX_FILE_BYTES}-byte limit; sample it first")
    raw = {"parquet": _parquet, "csv": _csv, "jsonl": _jsonl}[file_format(path, f"--from {path}")](path)
    if only:
        missing = [c for c in only if c not in raw]
        if missing:
            raise DataFileError(f"--features: {missing} not in {path} (its columns: {sorted(raw)[:20]})")
        raw = {c: raw[c] for c in only}
    if not raw:
        raise DataFileError(f"--from {path}: no columns found")
    if len(raw) > MAX_COLUMNS:
        raise DataFileError(f"--from {path}: {len(raw)} columns, over {MAX_COLUMNS}; choose some with --features")
    out = Columns(rows=max((len(v) for v in raw.values()), default=0))
    for name, cells in raw.items():
        kept = [c for c in cells if not is_empty(c)]
        if not kept:
            raise DataFileError(f"--from {path}: column {name!r} has no values")
        numbers = [as_number(c) for c in kept]
        if all(n is not None for n in numbers):
            out.numeric[name] = [float(n) for n in numbers if n is not None]
        else:
            out.categorical[name] = [str(c)[:MAX_CELL_CHARS] for c in kept]
    return out


def file_format(path: Path, where: str) -> str:
    """``parquet``, ``csv`` or ``jsonl``, by the file's suffix; ``where`` starts the error (the option, the file)."""
    suffix = path.suffix.lower()
    found = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}.get(suffix)
    if found is None:
        raise DataFileError(f"{where}: unknown format {suffix or '(none)'!r}; give a .parquet, .csv or .jsonl file")
    return found


def is_empty(cell: object) -> bool:
    return cell is None or cell == "" or (isinstance(cell, float) and math.isnan(cell))


def as_number(cell: object) -> float | None:
    if isinstance(cell, bool):
        return None  # a boolean column is categorical ("True"/"False")
    if isinstance(cell, int | float):
        return float(cell) if math.isfinite(cell) else None
    if isinstance(cell, str):
        try:
            value = float(cell)
        except ValueError:
            return None
        return value if math.isfinite(value) else None
    return None


def _check_rows(path: Path, n: int) -> None:
    if n > MAX_ROWS:
        raise DataFileError(f"--from {path}: over {MAX_ROWS} rows; sample it first (a reference keeps 1,000 values)")


def _csv(path: Path) -> dict[str, list[object]]:
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise DataFileError(f"--from {path}: empty, or no header row")
        if len(header) > MAX_COLUMNS:
            raise DataFileError(f"--from {path}: {len(header)} columns, over {MAX_COLUMNS}")
        cols: dict[str, list[object]] = {h: [] for h in header}
        for i, row in enumerate(reader, start=2):
            _check_rows(path, i - 1)
            if len(row) != len(header):
                raise DataFileError(f"--from {path}: line {i} has {len(row)} cells, the header {len(header)}")
            for h, cell in zip(header, row, strict=True):
                cols[h].append(cell.strip())
    return cols


def _jsonl(path: Path) -> dict[str, list[object]]:
    cols: dict[str, list[object]] = {}
    with path.open("rb") as f:
        for i, line in enumerate(f, start=1):
            _check_rows(path, i)
            if not line.strip():
                continue
            if len(line) > MAX_LINE_BYTES:
                raise DataFileError(f"--from {path}: line {i} is over 1 MiB")
            for k, v in json_row(line, f"--from {path}: line {i}").items():
                if k not in cols and len(cols) >= MAX_COLUMNS:
                    raise DataFileError(f"--from {path}: over {MAX_COLUMNS} distinct keys")
                cols.setdefault(k, []).append(v)
    return cols


def json_row(raw: bytes, where: str) -> dict[str, object]:
    """One JSON Lines row as ``{feature: value}``; ``where`` (file and line) starts the error of a bad one."""
    try:
        row = json.loads(raw)
    except ValueError as exc:
        raise DataFileError(f"{where} is not JSON: {exc}") from None
    if not isinstance(row, dict):
        raise DataFileError(f"{where} is not an object of feature: value")
    for k, v in row.items():
        if isinstance(v, dict | list):
            raise DataFileError(f"{where}, field {k!r}: nested values are not features")
    return row


def _parquet(path: Path) -> dict[str, list[object]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataFileError(
            f"--from {path}: reading Parquet needs pyarrow: pip install 'myolotrain[parquet]' (or give a .csv)"
        ) from None
    try:
        meta = pq.read_metadata(path)
        if meta.num_columns > MAX_COLUMNS:
            raise DataFileError(f"--from {path}: {meta.num_columns} columns, over {MAX_COLUMNS}")
        _check_rows(path, meta.num_rows)
        table = pq.read_table(path)
    except DataFileError:
        raise
    except Exception as exc:  # pyarrow raises many types for a damaged file
        raise DataFileError(f"--from {path}: not a readable Parquet file: {exc}") from None
    return {name: table.column(name).to_pylist() for name in table.column_names}
