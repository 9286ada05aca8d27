"""SHA-256 of bytes read in chunks, with an optional bound on how many: the one hashing loop of the tree.

Artifacts, data files and weights may be far larger than memory, and one an agent fetches or reads for a
command must not be read past what it was allowed; so every caller hashes through :class:`Sha256` (fed
chunk by chunk, as a download arrives) or :func:`sha256_file` (a file read to its end)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import BinaryIO, NamedTuple

CHUNK_BYTES = 1 << 20


class TooLarge(ValueError):
    """More than ``limit`` bytes were given; ``size`` is how many had been counted when it was seen."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes, more than the limit of {limit}")
        self.size = size
        self.limit = limit


class Hashed(NamedTuple):
    sha256: str  # hex
    size: int  # bytes


class Sha256:
    """A running SHA-256 and byte count; ``max_bytes`` (None: no bound) makes :meth:`update` raise
    :class:`TooLarge` before it takes the chunk that would pass it."""

    def __init__(self, max_bytes: int | None = None) -> None:
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.size = 0
        self._hash = hashlib.sha256()

    def update(self, chunk: bytes) -> None:
        size = self.size + len(chunk)
        if self.max_bytes is not None and size > self.max_bytes:
            raise TooLarge(size, self.max_bytes)
        self._hash.update(chunk)
        self.size = size

    def read(self, f: BinaryIO, *, chunk: int = CHUNK_BYTES, each: Callable[[bytes], object] | None = None) -> Hashed:
        """Hash ``f`` from where it is to its end; ``each(chunk)`` runs after each chunk is taken (write a
        copy, keep a heartbeat, check for a stop by raising). An ``OSError`` leaves :attr:`size` at what was
        read before it."""
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        while block := f.read(chunk):
            self.update(block)
            if each is not None:
                each(block)
        return self.result()

    def result(self) -> Hashed:
        return Hashed(self._hash.hexdigest(), self.size)


def sha256_file(
    path: str | os.PathLike[str],
    *,
    max_bytes: int | None = None,
    chunk: int = CHUNK_BYTES,
    each: Callable[[bytes], object] | None = None,
) -> Hashed:
    """The SHA-256 and size of a file's bytes (see :meth:`Sha256.read`); raises ``OSError`` and
    :class:`TooLarge` as they come."""
    with open(path, "rb") as f:
        return Sha256(max_bytes).read(f, chunk=chunk, each=each)
