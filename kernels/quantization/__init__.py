"""Post-training quantization of the trainer's GPT: 8- and 4-bit weights (rtn, gptq, hqq, dynamic fixed point),
packed kernels to run them, and the file that keeps them.

``from kernels.quantization import PTQConverter`` is the seed's API; ``save_quantized`` / ``load_quantized``
the file (``file.py``). torch loads on first use, like ``kernels.model``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernels.lazy import lazy_attributes

if TYPE_CHECKING:
    from kernels.quantization.convert import PTQConverter
    from kernels.quantization.file import load_quantized, save_quantized

__all__ = ["PTQConverter", "load_quantized", "save_quantized"]

__getattr__ = lazy_attributes(
    __name__,
    {
        "PTQConverter": "kernels.quantization.convert",
        "load_quantized": "kernels.quantization.file",
        "save_quantized": "kernels.quantization.file",
    },
)
