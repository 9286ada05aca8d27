"""The watermark's key and everything derived from it.

Nothing derived is stored: the bits, the projection and the carrier weights come from the key each time, through
HMAC-SHA256 (one label per use) and SHAKE-256 streams, so they are the same on every machine and every version
of numpy or torch. The key leaves this process only as its commitment, HMAC(key, "commitment"): it says which
key marked a model without telling the key. A short passphrase could be guessed from it offline, so a key file
(32 random bytes, ``python -m myolo.kernels.cli.watermark keygen``) is the way to use it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from myolo.common.keys import MIN_SECRET_BYTES, load_secret, watermark_commitment

KEY_FIELD = "watermark.key_file"


@dataclass(frozen=True, slots=True, repr=False)
class WatermarkKey:
    """The owner's secret. ``repr`` never shows it, so it cannot reach a log line by accident."""

    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) < 1:
            raise ValueError("a watermark key cannot be empty")

    def __repr__(self) -> str:
        return f"WatermarkKey(commitment={self.commitment[:16]}...)"

    @classmethod
    def of(cls, key: str | bytes) -> WatermarkKey:
        """From a passphrase or raw bytes (``generate(key="secret")``)."""
        return cls(key.encode() if isinstance(key, str) else bytes(key))

    @classmethod
    def from_file(cls, path: str | Path, field: str = KEY_FIELD) -> WatermarkKey:
        """From a key file its owner alone can read (mode 0600), of at least MIN_SECRET_BYTES bytes."""
        return cls(load_secret(path, field))

    @property
    def strong(self) -> bool:
        return len(self.secret) >= MIN_SECRET_BYTES

    def derive(self, label: str) -> bytes:
        return hmac.new(self.secret, label.encode(), hashlib.sha256).digest()

    @property
    def commitment(self) -> str:
        """What a registry may record: names the key, reveals nothing of it."""
        return watermark_commitment(self.secret)

    def stream(self, label: str, nbytes: int) -> bytes:
        """``nbytes`` pseudo-random bytes for ``label``: SHAKE-256 of the label's derived key."""
        return hashlib.shake_256(self.derive(label)).digest(nbytes)

    def uniform64(self, label: str, n: int) -> np.ndarray:
        """``n`` pseudo-random uint64 for ``label``."""
        return np.frombuffer(self.stream(label, 8 * n), dtype="<u8").copy() if n else np.zeros(0, np.uint64)

    def bits(self, label: str, n: int) -> np.ndarray:
        """``n`` pseudo-random bits (0/1, uint8) for ``label``."""
        raw = np.frombuffer(self.stream(label, (n + 7) // 8), dtype=np.uint8)
        return np.unpackbits(raw, bitorder="little")[:n].copy()
