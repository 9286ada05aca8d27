"""Attention autotune: measures each SDPA backend once per shape key, caches the winner on disk, and a new
instance or a new process reuses the cache without measuring (counted, not timed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from myolo.kernels.ops.autotune import attention as autotune
from myolo.kernels.ops.autotune.attention import CANDIDATES, AttentionAutotuner, key_for
from myolo.kernels.ops.backends import reference

torch.set_num_threads(1)
ROOT = Path(__file__).parents[5]


def _qkv(b=1, h=2, s=32, d=16, dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    return [torch.randn(b, h, s, d, generator=g, dtype=dtype) for _ in range(3)]


def test_measures_once_per_key_and_caches_on_disk(tmp_path):
    path = tmp_path / "attention_autotune.json"
    tuner = AttentionAutotuner(path, warmup=0, repeats=1)
    q, k, v = _qkv()
    first = tuner.choice(q, k, v, causal=True)
    assert tuner.measurements == len(CANDIDATES)  # every candidate tried once, unsupported ones included
    assert first[0] in {"MATH", "FLASH_ATTENTION"}  # the CPU build has these two
    assert set(first) == {"MATH", "FLASH_ATTENTION"}
    assert tuner.choice(q, k, v, causal=True) == first and tuner.measurements == len(CANDIDATES)
    entry = json.loads(path.read_text())["entries"][key_for(q, k, True).as_str()]
    assert entry["ranking"] == first and set(entry["errors"]) == {"EFFICIENT_ATTENTION", "CUDNN_ATTENTION"}

    second = AttentionAutotuner(path)
    assert second.choice(q, k, v, causal=True) == first
    assert second.measurements == 0


def test_each_key_field_makes_a_new_entry_and_entries_merge(tmp_path):
    path = tmp_path / "a.json"
    one, two = AttentionAutotuner(path, warmup=0, repeats=1), AttentionAutotuner(path, warmup=0, repeats=1)
    one.choice(*_qkv(), causal=True)
    two.choice(*_qkv(s=48), causal=True)  # written by another instance after `one` loaded the file
    one.choice(*_qkv(), causal=False)
    one.choice(*_qkv(dtype=torch.bfloat16), causal=True)
    assert one.measurements == 3 * len(CANDIDATES)
    keys = json.loads(path.read_text())["entries"].keys()
    assert len(keys) == 4 and any("sq=48" in k for k in keys) and any("causal=0" in k for k in keys)


def test_first_call_under_no_grad_or_inference_still_ranks(tmp_path):
    tuner = AttentionAutotuner(tmp_path / "a.json", warmup=0, repeats=1)
    with torch.no_grad():
        assert set(tuner.choice(*_qkv(), causal=True)) == {"MATH", "FLASH_ATTENTION"}
    with torch.inference_mode():
        assert set(tuner.choice(*_qkv(s=8), causal=True)) == {"MATH", "FLASH_ATTENTION"}


def test_corrupt_cache_is_rebuilt(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("{not json")
    tuner = AttentionAutotuner(path, warmup=0, repeats=1)
    assert tuner.choice(*_qkv(), causal=True)
    assert tuner.measurements == len(CANDIDATES)
    assert json.loads(path.read_text())["version"] == autotune.CACHE_VERSION
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".attention_autotune.")]  # no temp left


def test_autotuned_attention_matches_reference(tmp_path):
    tuner = AttentionAutotuner(tmp_path / "a.json", warmup=0, repeats=1)
    q, k, v = (t.requires_grad_(True) for t in _qkv())
    out = tuner.run(q, k, v, causal=True)
    torch.testing.assert_close(out, reference.attention(q, k, v, True), rtol=1e-5, atol=1e-5)


def test_autotune_can_be_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("MYOLO_ATTENTION_AUTOTUNE", "0")
    tuner = AttentionAutotuner(tmp_path / "a.json")
    q, k, v = _qkv()
    torch.testing.assert_close(tuner.run(q, k, v, True), reference.attention(q, k, v, True), rtol=1e-5, atol=1e-5)
    assert tuner.measurements == 0 and not (tmp_path / "a.json").exists()


def test_default_cache_path_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MYOLO_AUTOTUNE_CACHE", str(tmp_path / "x.json"))
    assert autotune.default_cache_path() == tmp_path / "x.json"
    monkeypatch.delenv("MYOLO_AUTOTUNE_CACHE")
    monkeypatch.setenv("MYOLO_CACHE_DIR", str(tmp_path / "c"))
    assert autotune.default_cache_path() == tmp_path / "c" / "attention_autotune.json"
    monkeypatch.delenv("MYOLO_CACHE_DIR")
    assert autotune.default_cache_path() == Path.home() / ".cache" / "myolo" / "attention_autotune.json"


_CHILD = """
import json, torch
torch.set_num_threads(1)
from myolo.kernels import ops
from myolo.kernels.ops.autotune import attention_autotuner
g = torch.Generator().manual_seed(1)
q, k, v = [torch.randn(1, 2, 32, 16, generator=g) for _ in range(3)]
out = ops.attention(q, k, v, causal=True)
print(json.dumps({"measurements": attention_autotuner().measurements, "choices": attention_autotuner().cached_choices(),
                  "sum": out.sum().item()}))
"""


def test_second_process_reuses_the_cache_without_measuring(tmp_path):
    env = {**os.environ, "MYOLO_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("MYOLO_AUTOTUNE_CACHE", None)

    def child() -> dict:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    first, second = child(), child()
    assert first["measurements"] == len(CANDIDATES)
    assert second["measurements"] == 0
    assert second["choices"] == first["choices"] and len(first["choices"]) == 1
    assert second["sum"] == pytest.approx(first["sum"], rel=1e-5)
    assert (tmp_path / "attention_autotune.json").exists()
