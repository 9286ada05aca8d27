"""Post-training quantization of the trainer's GPT: 8- and 4-bit weights (rtn, gptq, hqq, dynamic fixed point),
packed kernels to run them, and the file that keeps them.

``from myolo.kernels.quantization import PTQConverter`` converts a model; ``save_quantized`` / ``load_quantized``
the file (``file.py``). torch loads on first use, like ``myolo.kernels.model``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from myolo.kernels.lazy import lazy_attributes

if TYPE_CHECKING:
    from myolo.kernels.quantization.convert import PTQConverter
    from myolo.kernels.quantization.file import load_quantized, save_quantized

__all__ = ["PTQConverter", "load_quantized", "save_quantized"]

__getattr__ = lazy_attributes(
    __name__,
    {
        "PTQConverter": "myolo.kernels.quantization.convert",
        "load_quantized": "myolo.kernels.quantization.file",
        "save_quantized": "myolo.kernels.quantization.file",
    },
)
