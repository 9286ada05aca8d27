"""Measured choice of the SDPA backend per attention shape, cached on disk."""

from myolo.kernels.ops.autotune.attention import AttentionAutotuner, attention_autotuner, default_cache_path

__all__ = ["AttentionAutotuner", "attention_autotuner", "default_cache_path"]
