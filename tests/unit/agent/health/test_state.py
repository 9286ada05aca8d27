"""The stateful part of health: growth between samples, sticky and held events, node roll-up, faults."""

from __future__ import annotations

from myolo.agent.gpu.backend import GpuEvent
from myolo.agent.gpu.sample import build_sample
from myolo.agent.gpu.sim import SimBackend
from myolo.agent.gpu.sim_model import constant_profile
from myolo.agent.health import HealthState, fault_from_event
from myolo.common.clock import SimClock
from myolo.events.payloads import GpuReading, NodeSample


def reading(index: int = 0, uuid: str = "GPU-a", **fields) -> GpuReading:
    return GpuReading(index=index, uuid=uuid, name="H200", **fields)


def lr(h: HealthState, gpus: list[GpuReading]) -> tuple[str, list[str]]:
    res = h.evaluate(gpus)
    return res.level, res.reasons


def xid(gpu: int | None, n: int, t: float = 0.0) -> GpuEvent:
    return GpuEvent(gpu_index=gpu, gpu_uuid=None, kind="xid", time=t, xid=n)


async def test_growth_is_measured_against_the_previous_sample() -> None:
    clock = SimClock()
    h = HealthState(clock)
    assert lr(h, [reading(violation_thermal_ns=0)]) == ("ok", [])
    await clock.advance(1)
    level, reasons = lr(h, [reading(violation_thermal_ns=500_000_000)])
    assert level == "warn" and reasons == ["gpu 0: thermal violation time grew by 0.50 s"]
    await clock.advance(1)
    assert lr(h, [reading(violation_thermal_ns=500_000_000)]) == ("ok", [])


async def test_a_replaced_gpu_does_not_compare_with_its_predecessor() -> None:
    clock = SimClock()
    h = HealthState(clock)
    lr(h, [reading(uuid="GPU-old", violation_power_ns=0)])
    await clock.advance(1)
    assert lr(h, [reading(uuid="GPU-new", violation_power_ns=10**9)]) == ("ok", [])


async def test_pcie_rate_uses_the_clock_between_samples() -> None:
    clock = SimClock()
    h = HealthState(clock)
    link = {"pcie_link_gen": 5, "pcie_link_width": 16}
    lr(h, [reading(pcie_replay_counter=0, **link)])
    await clock.advance(120)
    assert lr(h, [reading(pcie_replay_counter=60, **link)])[0] == "ok"  # 30/min <= 30.72
    await clock.advance(60)
    assert lr(h, [reading(pcie_replay_counter=100, **link)])[0] == "warn"  # 40/min
    await clock.advance(1)
    assert lr(h, [reading(pcie_replay_counter=100, **link)])[0] == "warn"  # held until the next window
    await clock.advance(59)
    assert lr(h, [reading(pcie_replay_counter=101, **link)])[0] == "ok"


async def test_single_replays_at_one_hertz_do_not_warn() -> None:
    clock = SimClock()
    h = HealthState(clock)
    link = {"pcie_link_gen": 5, "pcie_link_width": 16}
    for n in range(180):
        if n % 3 == 0:
            level = lr(h, [reading(pcie_replay_counter=n // 3, **link)])[0]
            assert level == "ok"
        await clock.advance(1)


async def test_fail_events_stick_until_cleared_and_repeats_are_counted() -> None:
    clock = SimClock()
    h = HealthState(clock)
    assert h.on_event(xid(3, 79)).level == "fail"
    h.on_event(xid(3, 79))
    gpus = [reading(i, f"GPU-{i}") for i in range(4)]
    judged = h.evaluate(gpus)
    assert judged.level == "fail" and judged.reasons == ["gpu 3: xid 79 (fallen off the bus), seen 2 times"]
    assert judged.gpus[3].health == "fail" and judged.gpus[0].health == "ok"
    assert gpus[3].health == "ok"  # the backend's reading is left as it was
    await clock.advance(24 * 3600)
    assert lr(h, gpus)[0] == "fail"
    h.clear(3)
    assert lr(h, gpus) == ("ok", [])


async def test_warn_events_hold_then_expire() -> None:
    clock = SimClock()
    h = HealthState(clock, warn_hold_s=300)
    h.on_event(xid(1, 43))
    gpus = [reading(0, "GPU-0"), reading(1, "GPU-1")]
    assert lr(h, gpus) == ("warn", ["gpu 1: xid 43 (GPU stopped processing)"])
    await clock.advance(299)
    assert lr(h, gpus)[0] == "warn"
    await clock.advance(2)
    assert lr(h, gpus) == ("ok", [])


def test_informational_xids_leave_health_alone() -> None:
    h = HealthState(SimClock())
    assert h.on_event(xid(0, 13)).level == "ok"
    assert lr(h, [reading()]) == ("ok", [])


def test_event_of_unknown_gpu_counts_for_the_node() -> None:
    h = HealthState(SimClock())
    h.on_event(GpuEvent(gpu_index=None, gpu_uuid=None, kind="gpu_unavailable", time=0.0))
    gpus = [reading()]
    judged = h.evaluate(gpus)
    assert (judged.level, judged.reasons) == ("fail", ["GPU unavailable event"])
    assert judged.gpus[0].health == "ok"


def test_node_level_is_the_worst_gpu_and_keeps_each_reasons_level() -> None:
    h = HealthState(SimClock())
    gpus = [
        reading(0, "GPU-0", remapped_rows_pending=True),
        reading(1, "GPU-1", ecc_uncorrected_volatile=1, retired_pages_pending=True),
        reading(2, "GPU-2"),
    ]
    judged = h.evaluate(gpus)
    assert judged.level == "fail"
    assert judged.reasons[0] == "gpu 1: volatile double-bit ECC errors: 1"
    assert set(judged.reasons[1:]) == {
        "gpu 0: row remap pending (reset the GPU to apply)",
        "gpu 1: page retirement pending (reset the GPU to retire)",
    }
    assert [g.health for g in judged.gpus] == ["warn", "fail", "ok"]
    assert judged.gpus[1].health_reasons == [
        "volatile double-bit ECC errors: 1",
        "page retirement pending (reset the GPU to retire)",
    ]


def test_a_gpu_that_disappears_fails_the_node() -> None:
    h = HealthState(SimClock())
    lr(h, [reading(i, f"GPU-{i}") for i in range(8)])
    level, reasons = lr(h, [reading(i, f"GPU-{i}") for i in range(7)])
    assert level == "fail" and reasons == ["gpu count fell from 8 to 7"]
    h.clear()
    assert lr(h, [reading(i, f"GPU-{i}") for i in range(7)]) == ("ok", [])


def test_fault_from_event() -> None:
    h = HealthState(SimClock())
    ev = GpuEvent(gpu_index=2, gpu_uuid="GPU-SIM-2", kind="ecc_dbe", time=5.0, simulated=True)
    fault = fault_from_event(ev, "node-a", h.on_event(ev))
    assert (fault.kind, fault.health, fault.gpu_index, fault.gpu_uuid, fault.simulated) == (
        "ecc",
        "fail",
        2,
        "GPU-SIM-2",
        True,
    )
    assert fault.reasons == ["double-bit ECC error event"]
    x = fault_from_event(xid(1, 79), "node-a", h.on_event(xid(1, 79)))
    assert (x.kind, x.xid, x.health, x.simulated) == ("xid", 79, "fail", False)


async def test_build_sample_with_sim_backend_end_to_end() -> None:
    clock = SimClock()
    b = SimBackend(8, clock, profile=constant_profile(0.9))
    b.open()
    h = HealthState(clock)
    first = build_sample(b, "node-a", h, seq=1)
    assert isinstance(first, NodeSample) and first.backend == "sim" and first.health == "ok" and len(first.gpus) == 8
    q = b.start_events()
    b.set_throttle(4, "power")
    b.inject_xid(6, 79)
    while not q.empty():
        h.on_event(q.get_nowait())
    await clock.advance(1)
    second = build_sample(b, "node-a", h, seq=2)
    assert second.health == "fail"
    assert second.gpus[4].health == "warn" and second.gpus[6].health == "fail"
    assert "gpu 6: xid 79 (fallen off the bus)" in second.health_reasons
    assert any(r.startswith("gpu 4: power violation time grew") for r in second.health_reasons)
