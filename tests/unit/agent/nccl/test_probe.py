"""Bandwidth arithmetic and probe argument checks (the real subprocess runs in tests/integration)."""

from __future__ import annotations

import pytest

from myolo.agent.nccl.probe import ProbeError, ProbeSpec, _report, allreduce_bus_factor, bandwidth_points


@pytest.mark.parametrize(("n", "factor"), [(2, 1.0), (4, 1.5), (8, 1.75), (16, 1.875)])
def test_allreduce_bus_factor(n: int, factor: float) -> None:
    assert allreduce_bus_factor(n) == pytest.approx(factor)


def test_points_follow_nccl_tests_definitions() -> None:
    (p,) = bandwidth_points([(1 << 30, 0.01)], world_size=8)
    assert p.algbw_gbps == pytest.approx((1 << 30) / 0.01 / 1e9)
    assert p.busbw_gbps == pytest.approx(p.algbw_gbps * 2 * 7 / 8)


def test_non_positive_time_is_rejected() -> None:
    with pytest.raises(ProbeError, match="non-positive time"):
        bandwidth_points([(4096, 0.0)], world_size=2)


@pytest.mark.parametrize(
    ("spec", "field"),
    [(ProbeSpec(world_size=1), "world_size"), (ProbeSpec(sizes=()), "sizes"), (ProbeSpec(iters=0), "iters")],
)
def test_bad_spec_names_the_field(spec: ProbeSpec, field: str) -> None:
    with pytest.raises(ProbeError, match=field):
        spec.validate()


def test_probe_output_is_checked() -> None:
    spec = ProbeSpec()
    good = (
        b'{"points": [{"size_bytes": 4096, "time_s": 0.001}], "verified": true, "backend": "gloo", "world_size": 4}\n'
    )
    report = _report("n1", spec, 0, good, b"", ["python"], "cmd-1")
    assert report.world_size == 4 and report.command_id == "cmd-1"
    assert report.points[0].busbw_gbps == pytest.approx(4096 / 0.001 / 1e9 * 1.5)
    with pytest.raises(ProbeError, match="wrong sums"):
        _report("n1", spec, 0, good.replace(b"true", b"false"), b"", ["python"], None)
    with pytest.raises(ProbeError, match=r"failed \(exit 4\): boom"):
        _report("n1", spec, 4, b'{"error": "failed", "message": "boom"}', b"Traceback...", ["python"], None)
    with pytest.raises(ProbeError, match="torch is not installed"):
        _report("n1", spec, 1, b"", b"ModuleNotFoundError: No module named 'torch'", ["python"], None)
