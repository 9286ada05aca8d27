"""GPT-style decoder, its size presets and FLOPs accounting.

Presets and FLOPs are plain arithmetic and import eagerly; ``GPT`` (torch) loads on first use, so job
validation can read the presets without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from myolo.kernels.lazy import lazy_attributes
from myolo.kernels.model.config import PRESETS, ModelConfig, preset
from myolo.kernels.model.flops import flops_per_token, mfu

if TYPE_CHECKING:
    from myolo.kernels.model.gpt import GPT

__all__ = ["GPT", "PRESETS", "ModelConfig", "flops_per_token", "mfu", "preset"]

__getattr__ = lazy_attributes(__name__, {"GPT": "myolo.kernels.model.gpt"})
