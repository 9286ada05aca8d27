"""Model FLOPs per token and MFU, by the convention Megatron-LM and torchtitan report.

FLOPs/token = 6 x (non-embedding params) + 12 x layers x heads x head_dim x seq (attention scores and
values, no causal discount). MFU divides achieved model FLOP/s by the *dense* peak of the devices used;
quoting it against a sparse peak would halve it silently.
"""

from __future__ import annotations

from myolo.kernels.model.config import ModelConfig

# Dense bf16 tensor-core peaks, FLOP/s per device (not the 2:4-sparse figures).
DENSE_PEAK_BF16: dict[str, float] = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def param_count(cfg: ModelConfig, include_embedding: bool = False) -> int:
    """Parameter count from the config alone (no model needed), matching ``GPT.num_params``."""
    attn = cfg.dim * cfg.head_dim * (2 * cfg.n_heads + 2 * cfg.kv_heads)
    mlp = 3 * cfg.dim * cfg.hidden
    per_layer = attn + mlp + 2 * cfg.dim
    total = cfg.n_layers * per_layer + cfg.dim + cfg.vocab_size * cfg.dim  # final norm + output
    return total + (cfg.vocab_size * cfg.dim if include_embedding else 0)


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    return 6.0 * param_count(cfg) + 12.0 * cfg.n_layers * cfg.n_heads * cfg.head_dim * seq_len


def peak_flops(device_name: str | None) -> float | None:
    """Dense bf16 peak for a CUDA device name such as 'NVIDIA H200'; None when unknown (e.g. CPU)."""
    if not device_name:
        return None
    for key, peak in DENSE_PEAK_BF16.items():
        if key in device_name.upper():
            return peak
    return None


def mfu(cfg: ModelConfig, seq_len: int, tokens_per_s: float, peak_per_device: float | None, devices: int):
    """Fraction of the dense peak achieved, or None when the peak is not known."""
    if not peak_per_device:
        return None
    return flops_per_token(cfg, seq_len) * tokens_per_s / (peak_per_device * devices)
