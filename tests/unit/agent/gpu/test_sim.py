"""The simulated GPUs: correlated physics on simulated time, processes and leaks, and injected faults."""

from __future__ import annotations

import asyncio

import pytest

from myolo.agent.gpu import GpuBackend, NvmlBackend, SimBackend, make_backend
from myolo.agent.gpu.sim_faults import parse_leak_rate
from myolo.agent.gpu.sim_model import constant_profile, idle_profile, profile_from_name, training_profile
from myolo.agent.health import HealthState
from myolo.common.clock import SimClock


def sim(count: int = 2, profile=idle_profile, seed: int = 1) -> tuple[SimBackend, SimClock]:
    clock = SimClock()
    b = SimBackend(count, clock, seed=seed, profile=profile)
    b.open()
    return b, clock


def test_identity_and_label() -> None:
    b, _ = sim(8)
    assert isinstance(b, GpuBackend) and b.name == "sim" and b.device_count() == 8
    readings = b.read_all()
    assert [r.index for r in readings] == list(range(8))
    assert all(r.uuid.startswith("GPU-SIM-") and "sim" in r.name for r in readings)
    assert len({r.uuid for r in readings}) == 8
    other = SimBackend(8, SimClock(), node_tag="node-b")
    assert set(other.uuids).isdisjoint(b.uuids)
    # Hopper remaps rows rather than retiring pages: that field is absent, as NVML would leave it
    assert readings[0].retired_pages_sbe is None and readings[0].remapped_rows_uncorrectable == 0


async def test_power_follows_utilisation_fast_and_temperature_lags() -> None:
    b, clock = sim(1)
    idle = b.read_all()[0]
    assert idle.util_gpu == 0.0 and idle.clock_event_reasons == ["gpu_idle"]
    b.set_util(0, 100)
    await clock.advance(5)
    hot5 = b.read_all()[0]
    assert hot5.util_gpu > 85 and hot5.power_w > 600  # power tracks load within seconds
    assert hot5.temp_gpu_c - idle.temp_gpu_c < 0.2 * (80 - idle.temp_gpu_c)  # the die has not caught up
    await clock.advance(600)
    hot600 = b.read_all()[0]
    assert hot600.temp_gpu_c > 75 and hot600.temp_gpu_c > hot5.temp_gpu_c + 25
    assert hot600.clock_sm_mhz == 1980 and hot600.clock_event_reasons == []
    assert hot600.energy_j > idle.energy_j + 600 * 600  # ~700 W for 10 minutes
    assert hot600.nvlink_tx_bytes > hot5.nvlink_tx_bytes > 0


async def test_training_profile_has_checkpoint_and_eval_phases() -> None:
    b, clock = sim(2, profile=training_profile)
    assert training_profile(30) < 0.1 and training_profile(30 * 60) == 0.45 and training_profile(10 * 60) > 0.9
    await clock.advance(10 * 60)
    busy = b.read_all()
    await clock.advance(20 * 60)  # 30 min: evaluation at half load
    evaluating = b.read_all()
    for hot, warm in zip(busy, evaluating, strict=True):
        assert hot.util_gpu > 85 and 35 < warm.util_gpu < 55
        assert hot.power_w > warm.power_w
        assert hot.processes and hot.processes[0].used_bytes > 0.6 * hot.mem_total_bytes


async def test_memory_follows_processes_and_a_leak_grows_one() -> None:
    b, clock = sim(2, profile=constant_profile(0.9))
    start = b.read_all()
    r = start[0]
    assert r.processes is not None and len(r.processes) == 1
    assert r.mem_used_bytes == 512 * (1 << 20) + r.processes[0].used_bytes
    assert r.mem_used_bytes + r.mem_free_bytes + r.mem_reserved_bytes == r.mem_total_bytes
    b.set_leak_rate(0, parse_leak_rate("0.5%/h"))
    await clock.advance(3600)
    after = b.read_all()
    grown = after[0].mem_used_bytes - start[0].mem_used_bytes
    assert grown == pytest.approx(0.005 * r.mem_total_bytes, rel=1e-3)
    assert after[0].processes[0].used_bytes - start[0].processes[0].used_bytes == grown
    assert after[1].mem_used_bytes == start[1].mem_used_bytes  # the other GPU did not leak
    b.clear(0)
    assert b.read_all()[0].mem_used_bytes == start[0].mem_used_bytes


def test_idle_gpus_have_no_processes_until_a_leak_needs_one() -> None:
    b, _ = sim(1)
    r = b.read_all()[0]
    assert r.processes == [] and r.mem_used_bytes == 512 * (1 << 20)
    b.set_leak_rate(0, 1.0)
    assert len(b.read_all()[0].processes) == 1


async def test_thermal_throttle_lowers_clocks_heats_and_grows_violation_time() -> None:
    b, clock = sim(2, profile=constant_profile(0.95))
    before = b.read_all()
    b.set_throttle(0, "thermal")
    await clock.advance(10)
    mid = b.read_all()
    assert "sw_thermal_slowdown" in mid[0].clock_event_reasons
    assert mid[0].clock_sm_mhz < 0.7 * before[0].clock_sm_mhz
    assert mid[0].violation_thermal_ns - before[0].violation_thermal_ns == 10_000_000_000
    assert mid[1].violation_thermal_ns == 0 and mid[1].clock_event_reasons == []
    await clock.advance(600)
    hot = b.read_all()[0]
    assert hot.temp_gpu_c > 90 and "hw_thermal_slowdown" in hot.clock_event_reasons


async def test_power_throttle_caps_power() -> None:
    b, clock = sim(1, profile=constant_profile(1.0))
    b.set_throttle(None, "power")
    await clock.advance(30)
    r = b.read_all()[0]
    assert r.power_w <= 450 and r.power_limit_w == 450 and "sw_power_cap" in r.clock_event_reasons
    assert r.violation_power_ns == 30_000_000_000
    b.set_throttle(None, "none")
    await clock.advance(30)
    assert b.read_all()[0].power_w > 600


async def test_injected_xid_is_delivered_at_once_and_off_the_bus_stops_reads() -> None:
    b, clock = sim(4)
    q = b.start_events()
    b.inject_xid(2, 79)
    ev = q.get_nowait()  # no tick, no clock advance: delivered at once
    assert (ev.gpu_index, ev.kind, ev.xid, ev.simulated, ev.gpu_uuid) == (2, "xid", 79, True, b.uuids[2])
    assert ev.time == clock.now()
    r = b.read_all()
    assert r[2].health == "fail" and r[2].util_gpu is None and r[2].uuid == b.uuids[2]
    assert r[1].util_gpu is not None
    b.clear(2)
    assert b.read_all()[2].mem_total_bytes is not None


async def test_ecc_dbe_delivers_both_events_and_fails_health() -> None:
    b, clock = sim(2)
    q = b.start_events()
    health = HealthState(clock)
    b.inject_ecc_dbe(1)
    kinds = [q.get_nowait(), q.get_nowait()]
    assert [(e.kind, e.xid) for e in kinds] == [("ecc_dbe", None), ("xid", 48)]
    r = b.read_all()
    assert (r[1].ecc_uncorrected_volatile, r[1].ecc_uncorrected_aggregate, r[1].remapped_rows_pending) == (1, 1, True)
    judged = health.evaluate(r)
    assert judged.level == "fail" and any("gpu 1: volatile double-bit ECC" in x for x in judged.reasons)
    assert judged.gpus[1].health == "fail" and judged.gpus[0].health == "ok"
    b.clear(1)
    r = b.read_all()[1]
    assert (r.ecc_uncorrected_volatile, r.ecc_uncorrected_aggregate, r.remapped_rows_pending) == (0, 1, False)


async def test_events_without_listener_are_not_an_error_and_stop_is_idempotent() -> None:
    b, _ = sim(1)
    b.inject_xid(0, 31)
    q = b.start_events()
    assert q.empty() and b.start_events() is q
    b.stop_events()
    b.stop_events()
    b.close()


def test_same_seed_same_readings() -> None:
    a, _ = sim(3, profile=training_profile, seed=7)
    c, _ = sim(3, profile=training_profile, seed=7)
    assert a.read_all() == c.read_all()


def test_cost_is_measured_apart() -> None:
    b, _ = sim(8, profile=training_profile)
    for _ in range(20):
        b.read_all()
    assert b.cost.reads == 20
    assert 0.0 <= b.cost.step_cpu_s <= b.cost.read_cpu_s
    assert b.cost.convert_cpu_s == pytest.approx(b.cost.read_cpu_s - b.cost.step_cpu_s)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b: b.inject_xid(9, 79), "--gpu 9"),
        (lambda b: b.inject_xid(None, 79), "--xid needs one GPU"),
        (lambda b: b.inject_xid(0, 0), "--xid 0"),
        (lambda b: b.inject_ecc_dbe(-1), "--gpu -1"),
        (lambda b: b.set_leak_rate(0, -1), "--leak-rate -1"),
        (lambda b: b.set_throttle(0, "fan"), "--throttle 'fan'"),
        (lambda b: b.set_util(0, 130), "--util 130"),
    ],
)
def test_bad_fault_requests_name_the_option(call, message: str) -> None:
    b, _ = sim(2)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        call(b)


@pytest.mark.parametrize(("text", "rate"), [("0.5%/h", 0.5), ("0.5", 0.5), ("2 %/hour", 2.0), (".1%", 0.1), (3, 3.0)])
def test_parse_leak_rate(text, rate: float) -> None:
    assert parse_leak_rate(text) == rate


@pytest.mark.parametrize("text", ["fast", "-1%/h", "0.5%/day", "200"])
def test_parse_leak_rate_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="--leak-rate"):
        parse_leak_rate(text)


def test_profiles_and_factory() -> None:
    assert profile_from_name("constant:0.3")(99) == 0.3 and profile_from_name("idle")(5) == 0.0
    with pytest.raises(ValueError, match="load profile 'busy'"):
        profile_from_name("busy")
    with pytest.raises(ValueError, match="--simulate-gpus 0"):
        SimBackend(0)
    assert isinstance(make_backend(4), SimBackend) and isinstance(make_backend(None), NvmlBackend)
    assert make_backend(2, profile="idle").device_count() == 2


def test_read_before_open_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="open"):
        SimBackend(1, SimClock()).read_all()


async def test_events_reach_a_queue_from_another_thread() -> None:
    """The control socket may run anywhere: injecting from a worker thread still lands on the loop."""
    b, _ = sim(1)
    q = b.start_events()
    await asyncio.to_thread(b.inject_xid, 0, 94)
    ev = await asyncio.wait_for(q.get(), timeout=10)
    assert ev.xid == 94
