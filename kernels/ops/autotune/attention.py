"""Attention autotuning: time each SDPA backend once per shape key, keep the fastest, cache it on disk.

Why measure: which of flash / memory-efficient / cuDNN / math attention wins depends on the GPU, the
sequence length, the head dim and the dtype, and the defaults are not always the fastest. Why cache: the
measurement costs seconds on big shapes, and every restart (including elastic resizes) would pay it again.
The key includes the device name and torch version, so a cache copied to other hardware is not trusted.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import structlog
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from myolo.common.files import atomic_write

CANDIDATES: dict[str, SDPBackend] = {
    "MATH": SDPBackend.MATH,
    "FLASH_ATTENTION": SDPBackend.FLASH_ATTENTION,
    "EFFICIENT_ATTENTION": SDPBackend.EFFICIENT_ATTENTION,
    "CUDNN_ATTENTION": SDPBackend.CUDNN_ATTENTION,
}
CACHE_VERSION = 1
log = structlog.get_logger("myolo.kernels.ops")


def default_cache_path() -> Path:
    """MYOLO_AUTOTUNE_CACHE (a file), else attention_autotune.json in MYOLO_CACHE_DIR or ~/.cache/myolo."""
    explicit = os.environ.get("MYOLO_AUTOTUNE_CACHE")
    if explicit:
        return Path(explicit)
    root = os.environ.get("MYOLO_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "myolo"
    return base / "attention_autotune.json"


def autotune_enabled() -> bool:
    """MYOLO_ATTENTION_AUTOTUNE=0 leaves the choice to SDPA's own dispatch: the same backend in every
    process, whatever the timing noise (useful for bit-for-bit comparisons between runs)."""
    return os.environ.get("MYOLO_ATTENTION_AUTOTUNE", "1") != "0"


@dataclass(frozen=True)
class AttentionKey:
    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    dtype: str
    causal: bool
    device: str

    def as_str(self) -> str:
        return (
            f"{self.device}|torch={torch.__version__}|b={self.batch}|h={self.heads}|sq={self.seq_q}"
            f"|skv={self.seq_kv}|d={self.head_dim}|{self.dtype}|causal={int(self.causal)}"
        )


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return device.type


def key_for(q: torch.Tensor, k: torch.Tensor, causal: bool) -> AttentionKey:
    b, h, s_q, d = q.shape
    return AttentionKey(b, h, s_q, k.shape[-2], d, str(q.dtype).removeprefix("torch."), causal, device_label(q.device))


class AttentionAutotuner:
    """Per-key SDPA backend choice. `measurements` counts backend timings done by this instance (tests)."""

    def __init__(self, path: Path | str | None = None, warmup: int = 1, repeats: int = 3) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.warmup = warmup
        self.repeats = repeats
        self.measurements = 0
        self._entries: dict[str, dict] | None = None
        self._lock = threading.Lock()

    # -- lookup ------------------------------------------------------------------------------------
    def choice(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> list[str] | None:
        """Backends to allow, fastest first; measures when the key is new. None: let SDPA decide."""
        entries = self._load()
        key = key_for(q, k, causal).as_str()
        entry = entries.get(key)
        if entry is None:
            if torch.compiler.is_compiling():
                return None  # never time inside a trace; the eager first step fills the cache
            entry = self._measure(q, k, v, causal)
            self._store(key, entry)
        return entry["ranking"] or None

    def run(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        ranking = self.choice(q, k, v, causal) if autotune_enabled() else None
        if ranking is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        # All backends that worked, fastest first: if the caller's tensors differ from the probe (strides,
        # grad mode) and the winner refuses them, SDPA falls to the next one instead of failing.
        with sdpa_kernel([CANDIDATES[n] for n in ranking], set_priority=True):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def cached_choices(self) -> dict[str, str]:
        return {k: e["ranking"][0] for k, e in self._load().items() if e["ranking"]}

    # -- measurement -------------------------------------------------------------------------------
    def _measure(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> dict:
        times: dict[str, float] = {}
        errors: dict[str, str] = {}
        # Timed with gradients even when the first call comes under no_grad/inference_mode (evaluation
        # before training): the cached choice is for training, which pays forward + backward.
        with torch.inference_mode(False), torch.enable_grad():
            probes = [torch.randn(t.shape, device=t.device, dtype=t.dtype, requires_grad=True) for t in (q, k, v)]
            for name, backend in CANDIDATES.items():
                try:
                    times[name] = self._time(backend, *probes, causal)
                except RuntimeError as e:  # backend does not support this shape/dtype/device
                    errors[name] = str(e).splitlines()[0][:200]
                self.measurements += 1
        ranking = sorted(times, key=times.__getitem__)
        log.info("attention autotuned", key=key_for(q, k, causal).as_str(), times_s=times)
        return {
            "ranking": ranking,
            "times_ms": {n: round(t * 1e3, 4) for n, t in times.items()},
            "errors": errors,
            "measured_at": time.time(),
        }

    def _time(self, backend: SDPBackend, q, k, v, causal: bool) -> float:
        """Median seconds of forward+backward (what training pays) with only `backend` allowed."""

        def once() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "backend not available" warnings precede the error
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out.backward(torch.ones_like(out))
            q.grad = k.grad = v.grad = None

        def sync() -> None:
            if q.device.type == "cuda":
                torch.cuda.synchronize(q.device)

        for _ in range(self.warmup):
            once()
        samples = []
        for _ in range(self.repeats):
            sync()
            start = time.perf_counter()
            once()
            sync()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    # -- disk cache --------------------------------------------------------------------------------
    def _load(self) -> dict[str, dict]:
        if self._entries is None:
            self._entries = self._read_file()
        return self._entries

    def _read_file(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.warning("autotune cache unreadable", path=str(self.path), error=str(e))
            return {}
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return {}
        entries = data.get("entries", {})
        return {k: e for k, e in entries.items() if isinstance(e, dict) and isinstance(e.get("ranking"), list)}

    def _store(self, key: str, entry: dict) -> None:
        """Merge with what is on disk now (other ranks/processes may have written) and replace atomically."""
        with self._lock:
            merged = self._read_file()
            merged.update(self._entries or {})
            merged[key] = entry
            self._entries = merged
            body = json.dumps({"version": CACHE_VERSION, "entries": merged}, indent=1, sort_keys=True).encode()
            try:
                atomic_write(self.path, body, durable=False, mode=0o644)  # a cache is not a secret
            except OSError as e:  # a read-only cache dir must not stop training; we just re-measure next time
                log.warning("autotune cache not written", path=str(self.path), error=str(e))


_default: AttentionAutotuner | None = None


def attention_autotuner() -> AttentionAutotuner:
    """The process-wide tuner (cache path read from MYOLO_CACHE_DIR at first use)."""
    global _default
    if _default is None:
        _default = AttentionAutotuner()
    return _default


def set_attention_autotuner(tuner: AttentionAutotuner | None) -> None:
    global _default
    _default = tuner
