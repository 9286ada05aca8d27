"""Progress output: one JSON object per line from the worker, rendered by the launcher.

Rank 0 writes ``{"event": ...}`` records on stdout (its only stdout use); the launcher prints them
as-is with ``--json`` or as a live, self-overwriting line on a terminal (plain lines when piped).
The JSON is the standard library's (``NaN`` for a loss not yet known), keys sorted.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

import msgspec

from myolo.kernels.train.records import EndRecord, Record, StartRecord, StepRecord

RECORD_PREFIX = "@myolo "  # marks worker records so stray prints from libraries are not mistaken


def to_json(record: Record) -> str:
    return json.dumps(msgspec.to_builtins(record), sort_keys=True)


def emit(record: Record, stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    out.write(RECORD_PREFIX + to_json(record) + "\n")
    out.flush()


def parse(line: str) -> Record | None:
    """The record on a worker's output line; None for any other line (a library's print, a torn line)."""
    if not line.startswith(RECORD_PREFIX):
        return None
    try:
        return msgspec.convert(json.loads(line[len(RECORD_PREFIX) :]), Record)
    except (json.JSONDecodeError, msgspec.ValidationError):
        return None


def _si(x: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.1f}"


def format_line(rec: Record) -> str:
    """Human form of a record: the step line, or the start banner with layout and op backends."""
    if isinstance(rec, StartRecord):
        backends = ", ".join(f"{k}={v}" for k, v in sorted(rec.backends.items()))
        return (
            f"myolo-train: {rec.model} ({rec.params / 1e6:.2f}M params) layout {rec.layout} "
            f"on {rec.device} ({rec.dtype}), global batch {rec.global_batch} x {rec.seq_len}, "
            f"{rec.microbatches} microbatch(es)/replica, start step {rec.start_step}\n"
            f"  ops: {backends or '-'}"
        )
    if isinstance(rec, EndRecord):
        return f"done: {rec.steps} steps, final loss {rec.loss:.4f}, {_si(rec.tokens_per_s)} tok/s"
    parts = [
        f"step {rec.step}/{rec.steps}",
        f"loss {rec.loss:.4f}",
        f"{_si(rec.tokens_per_s)} tok/s",
        f"{rec.step_time_s * 1000:.0f} ms/step",
        f"gnorm {rec.grad_norm:.3f}",
    ]
    if rec.mfu is not None:
        parts.append(f"MFU {rec.mfu * 100:.1f}%")
    if rec.gradient_staleness:
        parts.append(f"stale {rec.gradient_staleness}")
    return " | ".join(parts)


class Renderer:
    """Prints records for a person (live line on a TTY) or a program (``--json``)."""

    def __init__(self, as_json: bool, stream: TextIO | None = None) -> None:
        self.as_json = as_json
        self.stream = stream or sys.stdout
        self.live = not as_json and self.stream.isatty()
        self._open_line = False

    def show(self, rec: Record) -> None:
        if self.as_json:
            self.stream.write(to_json(rec) + "\n")
        elif self.live and isinstance(rec, StepRecord):
            self.stream.write("\r\x1b[2K" + format_line(rec))
            self._open_line = True
        else:
            self.finish_line()
            self.stream.write(format_line(rec) + "\n")
        self.stream.flush()

    def finish_line(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self._open_line = False
