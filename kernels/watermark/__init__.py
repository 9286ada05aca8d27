"""A keyed watermark in a model's weights: ``DigitalWatermark.generate(key=...)``, ``apply``, ``verify``.

The seed's ``from myolo.security import DigitalWatermark`` is ``from kernels.watermark import DigitalWatermark``
here. torch loads on first use, like ``kernels.model``. How it works and what it survives: docs/watermark.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernels.lazy import lazy_attributes

if TYPE_CHECKING:
    from kernels.watermark.mark import DigitalWatermark, Verification, WatermarkSettings
    from kernels.watermark.secret import WatermarkKey

__all__ = ["DigitalWatermark", "Verification", "WatermarkKey", "WatermarkSettings"]

__getattr__ = lazy_attributes(
    __name__,
    {
        "DigitalWatermark": "kernels.watermark.mark",
        "Verification": "kernels.watermark.mark",
        "WatermarkSettings": "kernels.watermark.mark",
        "WatermarkKey": "kernels.watermark.secret",
    },
)
