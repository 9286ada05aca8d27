"""A keyed watermark in a model's weights: ``DigitalWatermark.generate(key=...)``, ``apply``, ``verify``.

torch loads on first use, like ``myolo.kernels.model``. How it works and what it survives: docs/watermark.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from myolo.kernels.lazy import lazy_attributes

if TYPE_CHECKING:
    from myolo.kernels.watermark.mark import DigitalWatermark, Verification, WatermarkSettings
    from myolo.kernels.watermark.secret import WatermarkKey

__all__ = ["DigitalWatermark", "Verification", "WatermarkKey", "WatermarkSettings"]

__getattr__ = lazy_attributes(
    __name__,
    {
        "DigitalWatermark": "myolo.kernels.watermark.mark",
        "Verification": "myolo.kernels.watermark.mark",
        "WatermarkSettings": "myolo.kernels.watermark.mark",
        "WatermarkKey": "myolo.kernels.watermark.secret",
    },
)
