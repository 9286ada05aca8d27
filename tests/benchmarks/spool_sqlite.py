"""A SQLite spool (standard-library ``sqlite3``, WAL mode) behind the interface of :class:`myolo.agent.spool.Spool`:
the candidate the spool benchmark measures against the segment files.

One table ``records(seq INTEGER PRIMARY KEY, body BLOB, crc INTEGER)``; the body is the same msgpack as a
segment frame's. SQLite checksums WAL frames but not the pages of the database file, so a flipped bit in a
stored value would come back unnoticed: the row keeps its own CRC32, as a frame does. The fsync policies map
to ``synchronous=FULL`` (``always``) and ``NORMAL`` plus an fsync of the WAL file every interval
(``interval``) or never (``never``). The cap deletes the oldest rows, ``segment_bytes`` at a time, and counts
the unsent ones in ``over_cap``. Acknowledged rows are deleted, so no cursor file is needed.
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path

import msgspec

from myolo.agent.spool import SpoolEntry, SpoolRecord, SpoolStats
from myolo.agent.spool.fsync import FsyncPolicy, FsyncSchedule
from myolo.common.clock import Clock, SystemClock

_ENC = msgspec.msgpack.Encoder()
_DEC = msgspec.msgpack.Decoder(SpoolRecord)


class SqliteSpool:
    def __init__(
        self,
        directory: str | Path,
        *,
        max_bytes: int,
        segment_bytes: int,
        fsync: FsyncPolicy = "interval",
        fsync_interval_s: float = 1.0,
        clock: Clock | None = None,
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "spool.db"
        self.max_bytes = max_bytes
        self.chunk_bytes = segment_bytes
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_s
        self._fsync = FsyncSchedule(fsync, fsync_interval_s, clock or SystemClock())
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if fsync == 'always' else 'NORMAL'}")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS records (seq INTEGER PRIMARY KEY, body BLOB NOT NULL, crc INTEGER)"
        )
        row = self._db.execute("SELECT count(*), coalesce(sum(length(body)), 0), min(seq), max(seq) FROM records")
        self._pending, self._bytes, first, last = row.fetchone()
        self._acked = (first - 1) if first is not None else 0
        self._last = last or 0
        self.appended = self.committed = self.over_cap = self.corrupt_frames = 0
        self._bad: set[int] = set()

    def append(self, record: SpoolRecord, *, sync: bool = False) -> int:
        body = _ENC.encode(record)
        seq = self._last + 1
        self._db.execute("INSERT INTO records VALUES (?, ?, ?)", (seq, body, zlib.crc32(body)))
        self._last = seq
        self._pending += 1
        self._bytes += len(body)
        self.appended += 1
        self._fsync.dirty = True
        if sync:
            self.sync()
        self._enforce_cap()
        return seq

    def sync(self) -> None:
        if not self._fsync.dirty:
            return
        self._fsync.dirty = False
        if self.fsync != "always":  # FULL already synced every commit
            fd = os.open(f"{self.path}-wal", os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._fsync.synced()

    def sync_due(self) -> bool:
        return self._fsync.due()

    def peek(self, max_records: int, max_bytes: int = 4 << 20) -> list[SpoolEntry]:
        out: list[SpoolEntry] = []
        total = 0
        for seq, body, crc in self._rows():
            record = self._decode(body, crc)
            if record is None:
                self._lost(seq)
                continue
            out.append(SpoolEntry(seq, record, 0, 0))
            total += len(record.value)
            if len(out) >= max_records or total >= max_bytes:
                break
        return out

    def commit(self, entry: SpoolEntry) -> None:
        if entry.seq <= self._acked:
            return
        row = self._db.execute(
            "SELECT count(*), coalesce(sum(length(body)), 0) FROM records WHERE seq <= ?", (entry.seq,)
        ).fetchone()
        self._db.execute("DELETE FROM records WHERE seq <= ?", (entry.seq,))
        bad = {s for s in self._bad if s <= entry.seq}  # counted out of pending when found
        self._bad -= bad
        self._pending -= row[0] - len(bad)
        self._bytes -= row[1]
        self.committed += row[0] - len(bad)
        self._acked = entry.seq

    @property
    def pending(self) -> int:
        return self._pending

    def stats(self) -> SpoolStats:
        return SpoolStats(
            pending_records=self._pending,
            bytes=self._bytes,
            max_bytes=self.max_bytes,
            segments=1,
            appended=self.appended,
            committed=self.committed,
            dropped=self.over_cap + self.corrupt_frames,
            last_seq=self._last,
            acked_seq=self._acked,
            over_cap=self.over_cap,
            corrupt_frames=self.corrupt_frames,
        )

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.dir.glob("spool.db*"))

    def close(self) -> None:
        if self.fsync != "never":
            self.sync()
        self._db.close()

    def _enforce_cap(self) -> None:
        while self._bytes > self.max_bytes:
            rows = self._db.execute(
                "SELECT seq, length(body) FROM records WHERE seq > ? ORDER BY seq LIMIT 4096", (self._acked,)
            ).fetchall()
            freed, upto, n = 0, self._acked, 0
            for seq, size in rows:
                freed, upto, n = freed + size, seq, n + 1
                if freed >= self.chunk_bytes:
                    break
            self._db.execute("DELETE FROM records WHERE seq <= ?", (upto,))
            self._bytes -= freed
            self._pending -= n
            self.over_cap += n
            self._acked = upto

    def _rows(self) -> Iterator[tuple[int, bytes, int]]:
        """Unacknowledged rows in order, read lazily; after SQLite reports a damaged page, row by row."""
        seq = self._acked
        try:
            for row in self._db.execute("SELECT seq, body, crc FROM records WHERE seq > ? ORDER BY seq", (seq,)):
                seq = row[0]
                if seq not in self._bad:
                    yield row
            return
        except sqlite3.DatabaseError:
            pass
        while seq < self._last:
            seq += 1
            if seq in self._bad:
                continue
            try:
                row = self._db.execute("SELECT seq, body, crc FROM records WHERE seq = ?", (seq,)).fetchone()
            except sqlite3.DatabaseError:
                row = None
            if row is None:
                self._lost(seq)
                continue
            yield row

    def _lost(self, seq: int) -> None:
        """A row that cannot be read or fails its CRC: counted once, skipped from then on."""
        if seq not in self._bad:
            self._bad.add(seq)
            self.corrupt_frames += 1
            self._pending -= 1

    @staticmethod
    def _decode(body: bytes, crc: int) -> SpoolRecord | None:
        if zlib.crc32(body) != crc:
            return None
        try:
            return _DEC.decode(body)
        except msgspec.DecodeError:
            return None
