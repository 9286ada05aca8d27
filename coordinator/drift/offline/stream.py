"""Read a Parquet, CSV or JSON Lines file as a stream of column chunks of a fixed number of rows.

Memory is one chunk (and, for Parquet, one record batch of a row group), whatever the file's size, so two
files larger than memory can be compared row by row. Chunks have exactly ``rows`` rows but the last, so the
chunks of two files line up row for row. The files are hostile input: each error names the file, the line or
column, and what to do.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from myolo.coordinator.drift.offline.files import (
    MAX_CELL_CHARS,
    MAX_COLUMNS,
    MAX_LINE_BYTES,
    DataFileError,
    file_format,
    json_row,
)

CHUNK_ROWS = 8192
Chunk = dict[str, list[object]]  # column -> its cells in this chunk (None where a row lacks the column)


def chunks(path: Path, rows: int = CHUNK_ROWS) -> Iterator[Chunk]:
    """The file's rows, ``rows`` at a time, as columns; the format by the file's suffix."""
    source = {"parquet": _parquet, "csv": _csv, "jsonl": _jsonl}[file_format(path, str(path))](path)
    return _rechunk(source, rows)


def _rechunk(batches: Iterator[Chunk], rows: int) -> Iterator[Chunk]:
    """Batches of any sizes as chunks of exactly ``rows`` rows (the last may be shorter)."""
    pending: Chunk = {}
    have = 0
    for batch in batches:
        n = len(next(iter(batch.values()))) if batch else 0
        for name in batch.keys() - pending.keys():
            pending[name] = [None] * have
        for name, cells in pending.items():
            cells.extend(batch.get(name, [None] * n))
        have += n
        while have >= rows:
            yield {k: v[:rows] for k, v in pending.items()}
            pending = {k: v[rows:] for k, v in pending.items()}
            have -= rows
    if have:
        yield pending


def _open_text(path: Path):
    try:
        return path.open(newline="", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def _csv(path: Path) -> Iterator[Chunk]:
    with _open_text(path) as f:
        reader = csv.reader(f)
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise DataFileError(f"{path}: line 1 is not CSV: {exc}") from None
        if not header:
            raise DataFileError(f"{path}: empty, or no header row; the first line names the columns")
        if len(header) > MAX_COLUMNS:
            raise DataFileError(f"{path}: {len(header)} columns, over {MAX_COLUMNS}; keep fewer columns")
        if len(set(header)) != len(header):
            twice = next(h for h in header if header.count(h) > 1)
            raise DataFileError(f"{path}: column {twice!r} is named twice in the header; name each column once")
        batch: Chunk = {h: [] for h in header}
        line = 1
        try:
            for line, row in enumerate(reader, start=2):
                if len(row) != len(header):
                    raise DataFileError(f"{path}: line {line} has {len(row)} cells, the header {len(header)}")
                for h, cell in zip(header, row, strict=True):
                    batch[h].append(cell.strip()[:MAX_CELL_CHARS])
                if len(batch[header[0]]) >= CHUNK_ROWS:
                    yield batch
                    batch = {h: [] for h in header}
        except csv.Error as exc:
            raise DataFileError(f"{path}: line {line + 1} is not CSV: {exc}") from None
        if batch[header[0]]:
            yield batch


def _jsonl(path: Path) -> Iterator[Chunk]:
    try:
        f = path.open("rb")
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    with f:
        batch: Chunk = {}
        n = 0
        for i, raw in enumerate(f, start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise DataFileError(f"{path}: line {i} is over {MAX_LINE_BYTES} bytes; one row per line")
            if not raw.strip():
                continue
            for k, v in json_row(raw, f"{path}: line {i}").items():
                if k not in batch:
                    if len(batch) >= MAX_COLUMNS:
                        raise DataFileError(f"{path}: line {i}: over {MAX_COLUMNS} distinct fields")
                    batch[k] = [None] * n
                batch[k].append(v[:MAX_CELL_CHARS] if isinstance(v, str) else v)
            n += 1
            for cells in batch.values():
                if len(cells) < n:
                    cells.append(None)
            if n >= CHUNK_ROWS:
                yield batch
                batch, n = {k: [] for k in batch}, 0
        if n:
            yield batch


def _parquet(path: Path) -> Iterator[Chunk]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataFileError(
            f"{path}: reading Parquet needs pyarrow: pip install 'myolotrain[parquet]' (or give a .csv)"
        ) from None
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises many types for a damaged file
        raise DataFileError(f"{path}: not a readable Parquet file: {exc}") from None
    if pf.metadata.num_columns > MAX_COLUMNS:
        raise DataFileError(f"{path}: {pf.metadata.num_columns} columns, over {MAX_COLUMNS}; keep fewer columns")
    try:
        for batch in pf.iter_batches(batch_size=CHUNK_ROWS):  # row group by row group
            yield batch.to_pydict()
    except DataFileError:
        raise
    except Exception as exc:
        raise DataFileError(f"{path}: a row group does not read: {exc}") from None
