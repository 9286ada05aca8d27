"""Text in and out of a byte-level model: UTF-8 bytes are the token ids 0..255.

The platform has no tokenizer of its own; the models trained on text here (the quantization benchmark's) are
byte-level, so the same encoding serves their prompts. Models with another vocabulary take token ids.
"""

from __future__ import annotations

BYTE_VOCAB = 256


def encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def decode(tokens: list[int]) -> str:
    """Bytes to text; an id over 255 (a model with a larger vocabulary) and broken UTF-8 become U+FFFD."""
    return bytes(t if t < BYTE_VOCAB else 0xFF for t in tokens).decode("utf-8", errors="replace")


def parse_ids(text: str) -> list[int]:
    """Whitespace-separated token ids (``--tokens``); ValueError naming the first that is not one."""
    out = []
    for i, word in enumerate(text.split()):
        if not word.isdigit():
            raise ValueError(f"token {i} of the prompt, {word[:20]!r}, is not a token id (a non-negative integer)")
        out.append(int(word))
    return out
