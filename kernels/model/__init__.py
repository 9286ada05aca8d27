"""GPT-style decoder, its size presets and FLOPs accounting."""

from kernels.model.config import PRESETS, ModelConfig, preset
from kernels.model.flops import flops_per_token, mfu
from kernels.model.gpt import GPT

__all__ = ["GPT", "PRESETS", "ModelConfig", "flops_per_token", "mfu", "preset"]
