"""A safetensors file written tensor by tensor, byte-for-byte the same for the same weights and metadata.

Why not ``safetensors.torch.save_file``: it orders the header's metadata by a hash map, so two exports of
one checkpoint differed in their SHA-256 (an operator's hand export could not be checked against the job's);
and it copies every tensor into one buffer first, a second full model in host memory. The format is small
(https://github.com/huggingface/safetensors#format): a little-endian u64 header length, a JSON header padded
with spaces to 8 bytes, then each tensor's bytes at the offsets the header gives. ``read_weights`` (the
safetensors library) reads it back, and the tests check that it does.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Mapping
from typing import BinaryIO

import torch

DTYPES: dict[torch.dtype, str] = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def header(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> bytes:
    """The padded JSON header for ``tensors`` laid out in name order."""
    entries: dict[str, object] = {"__metadata__": dict(sorted(metadata.items()))}
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in DTYPES:
            raise TypeError(f"tensor {name!r} has dtype {t.dtype}, which safetensors export does not support")
        size = t.numel() * t.element_size()
        entries[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(entries, separators=(",", ":"), sort_keys=False).encode()
    return raw + b" " * (-len(raw) % 8)


def write_safetensors(f: BinaryIO, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> None:
    """Write CPU, contiguous ``tensors`` to the open binary file ``f``."""
    if sys.byteorder != "little":
        raise RuntimeError("safetensors stores little-endian data; this export runs on little-endian hosts only")
    head = header(tensors, metadata)
    f.write(struct.pack("<Q", len(head)))
    f.write(head)
    for name in sorted(tensors):
        t = tensors[name]
        if t.device.type != "cpu" or not t.is_contiguous():
            raise ValueError(f"tensor {name!r} must be a contiguous CPU tensor to be written")
        if t.numel():
            f.write(t.reshape(-1).view(torch.uint8).numpy().data)
