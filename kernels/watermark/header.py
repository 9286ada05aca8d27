"""The mark a model file names in its safetensors header: ``myolo.watermark``, the commitment and the settings
(never the key). A quantized file made from a marked export names the same mark (``myolo.kernels.quantization``).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from myolo.events.payloads.models import Watermark

META_WATERMARK = "myolo.watermark"


def file_watermark(metadata: Mapping[str, str]) -> Watermark | None:
    """The mark a file's header names, if any; ``ValueError`` when the entry is malformed."""
    raw = metadata.get(META_WATERMARK)
    if raw is None:
        return None
    try:
        return msgspec.json.decode(raw, type=Watermark)
    except msgspec.DecodeError as exc:
        raise ValueError(f"the file's {META_WATERMARK} header entry is malformed: {exc}") from None


def with_watermark(metadata: Mapping[str, str], record: Watermark | None) -> dict[str, str]:
    """``metadata`` naming ``record`` (unchanged when there is none)."""
    if record is None:
        return dict(metadata)
    return {**metadata, META_WATERMARK: msgspec.json.encode(record).decode()}
