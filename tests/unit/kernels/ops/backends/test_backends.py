"""Each backend usable on this machine matches the reference (forward and backward, per-dtype tolerance);
the registry falls back in order, honours a forced order, and never sends a DTensor to a raw kernel."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest
import torch

from myolo.kernels import ops
from myolo.kernels.ops import registry
from myolo.kernels.ops.backends import apex_backend
from tests.support.kernels.ops_checks import compare_to_reference

torch.set_num_threads(1)
DTYPES = [torch.float32, torch.bfloat16]
NUMERIC_OPS = ["rms_norm", "residual_rms_norm", "layer_norm", "cross_entropy", "attention", "adamw"]


@pytest.fixture(autouse=True)
def _fresh_registry(tmp_path, monkeypatch):
    monkeypatch.setenv("MYOLO_CACHE_DIR", str(tmp_path))
    from myolo.kernels.ops.autotune import attention as autotune

    autotune.set_attention_autotuner(None)
    registry.reset()
    yield
    registry.reset()
    registry._backends = None
    autotune.set_attention_autotuner(None)


def _usable(op: str, dtype: torch.dtype) -> list[str]:
    return [n for n, why in ops.availability(op, "cpu", dtype).items() if why == "available" and n != "reference"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", NUMERIC_OPS)
def test_every_available_backend_matches_reference(op, dtype):
    usable = _usable(op, dtype)
    assert "native" in usable, f"native {op} should be usable on CPU: {ops.availability(op, 'cpu', dtype)}"
    reference = registry.backends()["reference"].impls[op]
    for name in usable:
        compare_to_reference(op, registry.backends()[name].impls[op], reference, dtype, name)


def test_layer_norm_without_bias_matches_reference():
    x = torch.randn(4, 33)
    w = torch.randn(33)
    ref = registry.backends()["reference"].impls["layer_norm"](x, w, None, 1e-5)
    torch.testing.assert_close(ops.layer_norm(x, w, None, 1e-5), ref, rtol=1e-5, atol=1e-5)


def test_cross_entropy_all_ignored_is_nan_like_torch():
    logits = torch.randn(3, 5)
    targets = torch.full((3,), -100)
    ref = registry.backends()["reference"].impls["cross_entropy"](logits, targets, -100)
    assert torch.isnan(ops.cross_entropy(logits, targets)) and torch.isnan(ref)


def test_default_selection_on_cpu_is_native_with_apex_reason_logged():
    selected = ops.configure(device="cpu", dtype=torch.float32)
    assert selected == dict.fromkeys(ops.OPS, "native")
    assert ops.selected_backends() == selected
    reasons = ops.availability("rms_norm", "cpu", torch.float32)
    assert reasons["apex"] == "apex kernels need a CUDA device, got cpu"
    assert "TRITON_INTERPRET" in reasons["triton"]


def _fake(monkeypatch, **available: bool) -> None:
    """Pretend backends are (un)available everywhere, keeping their real implementations."""
    table = dict(registry.backends())
    for name, ok in available.items():
        reason = None if ok else f"{name} forced unavailable by test"
        table[name] = dataclasses.replace(table[name], unavailable=lambda op, d, t, r=reason: r)
    monkeypatch.setattr(registry, "_backends", table)


def test_fallback_order(monkeypatch):
    _fake(monkeypatch, apex=True, native=True, triton=True)
    assert registry.resolve("rms_norm", torch.device("cpu"), torch.float32)[0] == "apex"
    assert registry.resolve("cross_entropy", torch.device("cpu"), torch.float32)[0] == "native"  # apex has none
    registry.reset()
    _fake(monkeypatch, apex=False, native=True, triton=True)
    assert registry.resolve("rms_norm", torch.device("cpu"), torch.float32)[0] == "native"
    registry.reset()
    _fake(monkeypatch, apex=False, native=False, triton=True)
    assert registry.resolve("rms_norm", torch.device("cpu"), torch.float32)[0] == "triton"
    assert registry.resolve("layer_norm", torch.device("cpu"), torch.float32)[0] == "reference"  # no triton LN
    registry.reset()
    _fake(monkeypatch, apex=False, native=False, triton=False)
    assert ops.configure() == dict.fromkeys(ops.OPS, "reference")


def test_dtensor_inputs_never_reach_raw_kernels(monkeypatch):
    _fake(monkeypatch, apex=True, native=True, triton=True)
    ops.configure(prefer={"*": ["triton", "apex", "native"]})
    cpu = torch.device("cpu")
    assert registry.resolve("rms_norm", cpu, torch.float32, dtensor=False)[0] == "triton"
    assert registry.resolve("rms_norm", cpu, torch.float32, dtensor=True)[0] == "native"
    assert registry.resolve("adamw", cpu, torch.float32, dtensor=True)[0] == "native"  # apex FusedAdam skipped
    assert ops.availability("rms_norm", cpu, torch.float32, dtensor=True)["apex"] == "not DTensor-capable"


def test_prefer_forces_order_and_reference_is_last_resort(monkeypatch):
    selected = ops.configure(prefer={"rms_norm": ["reference", "native"], "*": ["native"]})
    assert selected["rms_norm"] == "reference"
    assert selected["layer_norm"] == "native"
    _fake(monkeypatch, triton=False)
    assert ops.configure(prefer={"cross_entropy": ["triton"]})["cross_entropy"] == "reference"
    x = torch.randn(2, 8)
    ops.rms_norm(x, torch.ones(8), 1e-6)
    assert ops.selected_backends()["rms_norm"] == "native"


def test_prefer_rejects_unknown_names_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown backend 'cudnn'.*valid backends are apex, native, triton"):
        ops.configure(prefer={"rms_norm": ["cudnn"]})
    with pytest.raises(ValueError, match=r"unknown op 'rmsnorm'.*rms_norm, residual_rms_norm"):
        ops.configure(prefer={"rmsnorm": ["native"]})
    with pytest.raises(ValueError, match=r"prefer\['adamw'\] is empty"):
        ops.configure(prefer={"adamw": []})


def test_selected_backends_reports_what_calls_used():
    assert ops.selected_backends() == {}
    ops.cross_entropy(torch.randn(4, 6), torch.tensor([0, 1, 2, 3]))
    assert ops.selected_backends() == {"cross_entropy": "native"}
    ops.configure(prefer={"cross_entropy": ["reference"]})
    ops.cross_entropy(torch.randn(4, 6), torch.tensor([0, 1, 2, 3]))
    assert ops.selected_backends()["cross_entropy"] == "reference"


def test_make_adamw_needs_params():
    with pytest.raises(ValueError, match="params is empty"):
        ops.make_adamw([], lr=1e-3)
    opt = ops.make_adamw([{"params": [torch.nn.Parameter(torch.ones(2))], "lr": 0.5}], lr=1e-3)
    assert opt.param_groups[0]["lr"] == 0.5 and opt.defaults["fused"] is True


# -- apex detection: a Python-only build or the unrelated PyPI package must be reported unavailable -------
def _install_modules(monkeypatch, present: list[str], absent: list[str]) -> None:
    for name in present:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    for name in absent:
        monkeypatch.setitem(sys.modules, name, None)  # makes `import name` raise ImportError
    apex_backend.module_error.cache_clear()


@pytest.fixture
def _apex_cache():
    apex_backend.module_error.cache_clear()
    yield
    apex_backend.module_error.cache_clear()


APEX_PY = ["apex", "apex.normalization", "apex.normalization.fused_layer_norm", "apex.optimizers"]


def test_python_only_apex_build_is_unavailable(monkeypatch, _apex_cache):
    _install_modules(monkeypatch, APEX_PY, ["fused_layer_norm_cuda", "amp_C"])
    status = apex_backend.apex_status()
    assert all("Python-only build" in why for why in status.values()), status
    why = apex_backend.BACKEND.unavailable("rms_norm", torch.device("cuda"), torch.bfloat16)
    assert "no compiled 'fused_layer_norm_cuda'" in why


def test_pypi_apex_is_not_mistaken_for_nvidia_apex(monkeypatch, _apex_cache):
    _install_modules(
        monkeypatch, ["apex"], ["apex.normalization", "apex.normalization.fused_layer_norm", "apex.optimizers"]
    )
    assert "not NVIDIA apex" in apex_backend.apex_status()["layer_norm"]


def test_apex_with_extensions_is_available_on_cuda_only(monkeypatch, _apex_cache):
    _install_modules(monkeypatch, [*APEX_PY, "fused_layer_norm_cuda", "amp_C"], [])
    assert set(apex_backend.apex_status().values()) == {"available"}
    assert apex_backend.BACKEND.unavailable("adamw", torch.device("cuda"), torch.bfloat16) is None
    assert "need a CUDA device" in apex_backend.BACKEND.unavailable("adamw", torch.device("cpu"), torch.float32)


def test_apex_missing_entirely(monkeypatch, _apex_cache):
    _install_modules(monkeypatch, [], ["apex"])
    assert set(apex_backend.apex_status().values()) == {"apex is not installed"}
