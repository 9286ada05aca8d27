"""What this agent has promised about commands, on disk: the highest leader epoch seen and the commands taken.

Both must survive a restart, or a restarted agent would obey a fenced leader again and run a retried command
twice. The file is a journal of JSON lines (``epoch`` and ``cmd`` records), each appended and fsynced
*before* the agent acts on it, so the cost per command is one small write whatever the history's length. At
open the journal is replayed and rewritten compacted (temporary file, fsync, atomic rename, fsync of the
directory): a line torn by a crash is dropped then (it was never synced, so nothing acted on it), and the set
of remembered command ids is bounded, oldest finished first.

A command still ``accepted`` at open was interrupted by the stop: it is marked ``failed`` and never re-run,
because running a command twice is worse than reporting that it may not have finished.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from myolo.common.files import atomic_write
from myolo.events.payloads.commands import Outcome

LEDGER_FILE = "ledger.jsonl"
DEFAULT_MAX_IDS = 4096
COMPACT_AFTER = 1024  # journal lines beyond which (and beyond 3x the entries) it is rewritten from its state
INTERRUPTED = "interrupted: the agent stopped while the command ran; it was not run again"
EntryStatus = Literal["accepted", Outcome]  # taken and running, or what it came to


class LedgerError(RuntimeError):
    """The ledger cannot be read or written; the message names the file and what to do."""


class EpochLine(msgspec.Struct, tag="epoch"):
    epoch: int


class Entry(msgspec.Struct, tag="cmd", kw_only=True):
    """One command this agent took, and (once finished) its outcome."""

    command_id: str
    action: str
    epoch: int
    status: EntryStatus = "accepted"
    reason: str | None = None
    result: dict[str, Any] = {}
    accepted_at: float = 0.0
    finished_at: float | None = None


_DECODER = msgspec.json.Decoder(EpochLine | Entry)
_ENCODER = msgspec.json.Encoder()


@dataclass
class _State:
    epoch: int
    entries: OrderedDict[str, Entry]


class Ledger:
    """Open with :meth:`open`; every mutating call is durable when it returns."""

    def __init__(self, path: Path, state: _State, max_ids: int, compact_after: int = COMPACT_AFTER) -> None:
        self.path = path
        self._state = state
        self._max_ids = max_ids
        self._compact_after = compact_after
        self._lines = 0
        self._file = None
        self._compact()

    @classmethod
    def open(
        cls,
        state_dir: str | Path,
        *,
        max_ids: int = DEFAULT_MAX_IDS,
        now: float = 0.0,
        compact_after: int = COMPACT_AFTER,
    ) -> Ledger:
        """Replay ``<state_dir>/ledger.jsonl`` (created if absent) and mark interrupted commands failed."""
        if max_ids < 1:
            raise LedgerError(f"max_ids must be >= 1, got {max_ids}")
        directory = Path(state_dir)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"cannot create the command state dir {str(directory)!r}: {exc.strerror}") from None
        path = directory / LEDGER_FILE
        state = _replay(path)
        for entry in state.entries.values():
            if entry.status == "accepted":
                entry.status, entry.reason, entry.finished_at = "failed", INTERRUPTED, now
        return cls(path, state, max_ids, compact_after)

    @property
    def epoch(self) -> int:
        """The highest leader epoch this agent has seen (0 before any command)."""
        return self._state.epoch

    def __len__(self) -> int:
        return len(self._state.entries)

    def get(self, command_id: str) -> Entry | None:
        return self._state.entries.get(command_id)

    def raise_epoch(self, epoch: int) -> bool:
        """Record a newer epoch (durably) before anything is done under it. False when it is not newer."""
        if epoch <= self._state.epoch:
            return False
        self._append(EpochLine(epoch))
        self._state.epoch = epoch
        return True

    def begin(self, command_id: str, action: str, epoch: int, now: float) -> Entry:
        """Record that a command is taken: from now on a retry of its id is a duplicate."""
        if command_id in self._state.entries:
            raise LedgerError(f"command {command_id!r} was already taken")
        entry = Entry(command_id=command_id, action=action, epoch=epoch, accepted_at=now)
        self._append(entry)
        self._state.entries[command_id] = entry
        self._state.epoch = max(self._state.epoch, epoch)
        self._evict()
        return entry

    def finish(self, command_id: str, status: Outcome, reason: str | None, result: dict[str, Any], now: float) -> Entry:
        """Record a taken command's outcome (what a retry of its id will be told)."""
        old = self._state.entries.get(command_id)
        if old is None:
            raise LedgerError(f"command {command_id!r} was never taken")
        entry = msgspec.structs.replace(old, status=status, reason=reason, result=result, finished_at=now)
        self._append(entry)
        self._state.entries[command_id] = entry
        return entry

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _append(self, line: EpochLine | Entry) -> None:
        if self._lines > max(self._compact_after, 3 * len(self._state.entries)):
            self._compact()
        assert self._file is not None, "ledger is closed"
        try:
            self._file.write(_ENCODER.encode(line) + b"\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise LedgerError(f"cannot write the command ledger {str(self.path)!r}: {exc.strerror}") from None
        self._lines += 1

    def _evict(self) -> None:
        """Forget the oldest finished commands beyond the bound (a running one is never forgotten)."""
        entries = self._state.entries
        excess = len(entries) - self._max_ids
        if excess <= 0:
            return
        for cid in [cid for cid, e in entries.items() if e.status != "accepted"][:excess]:
            del entries[cid]

    def _compact(self) -> None:
        """Rewrite the journal as its current state, atomically."""
        self.close()
        self._evict()
        lines = [EpochLine(self._state.epoch), *self._state.entries.values()]
        try:
            atomic_write(self.path, b"".join(_ENCODER.encode(line) + b"\n" for line in lines))
            self._file = open(self.path, "ab")  # noqa: SIM115 - kept open for appends until close()
        except OSError as exc:
            raise LedgerError(f"cannot write the command ledger {str(self.path)!r}: {exc.strerror}") from None
        self._lines = len(lines)


def _replay(path: Path) -> _State:
    state = _State(0, OrderedDict())
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return state
    except OSError as exc:
        raise LedgerError(f"cannot read the command ledger {str(path)!r}: {exc.strerror}") from None
    lines = raw.split(b"\n")
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            line = _DECODER.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if number == len(lines):  # the unterminated last line: torn by a crash, never synced, never acted on
                break
            raise LedgerError(
                f"command ledger {str(path)!r} line {number} is corrupt ({exc}); move the file away to start with "
                "an empty ledger (commands retried by the coordinator may then run again)"
            ) from None
        if isinstance(line, EpochLine):
            state.epoch = max(state.epoch, line.epoch)
        else:
            state.entries[line.command_id] = line  # a known id keeps its place: eviction is by first-taken
            state.epoch = max(state.epoch, line.epoch)
    return state
