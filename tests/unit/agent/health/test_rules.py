"""Health rules, table-driven: every XID class of DCGM >= 4.4 and every counter rule of the notes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from myolo.agent.gpu.backend import GpuEvent
from myolo.agent.health import FAIL_XIDS, WARN_XIDS, classify_event, classify_xid, gpu_findings, summarise
from myolo.agent.health.rules import pcie_findings, pcie_replay_limit_per_min
from myolo.events.payloads import GpuReading, NvLink
from myolo.events.payloads.compact import compact_gpu

FAIL = [48, 74, 79, 95, 119, 120, 140, 64]
WARN = [94, 31, 32, 43, 63, 38, 39, 42, 60, 61, 62, 54, 56, 57, 58, 78, 67, 73, 121, 137]


def gpu(**fields) -> GpuReading:
    return GpuReading(index=0, uuid="GPU-x", name="H200", **fields)


@pytest.mark.parametrize("xid", FAIL)
def test_fail_xids(xid: int) -> None:
    f = classify_xid(xid)
    assert f.level == "fail" and f.reason.startswith(f"xid {xid} (")


@pytest.mark.parametrize("xid", WARN)
def test_warn_xids(xid: int) -> None:
    f = classify_xid(xid)
    assert f.level == "warn" and f.reason.startswith(f"xid {xid} (")


def test_tables_are_exactly_the_notes_classes() -> None:
    assert set(FAIL_XIDS) == set(FAIL) and set(WARN_XIDS) == set(WARN)


@pytest.mark.parametrize("xid", [13, 45, 109, 999])
def test_unlisted_xids_are_informational(xid: int) -> None:
    assert classify_xid(xid).level == "ok"


@pytest.mark.parametrize(
    ("kind", "xid", "level"),
    [
        ("xid", 79, "fail"),
        ("xid", 43, "warn"),
        ("xid", 13, "ok"),
        ("ecc_dbe", None, "fail"),
        ("ecc_sbe", None, "ok"),
        ("retirement", None, "warn"),
        ("retirement_failure", None, "fail"),
        ("gpu_unavailable", None, "fail"),
    ],
)
def test_event_classes(kind: str, xid: int | None, level: str) -> None:
    event = GpuEvent(gpu_index=0, gpu_uuid="GPU-x", kind=kind, time=0.0, xid=xid)  # type: ignore[arg-type]
    assert classify_event(event).level == level


# (current fields, previous fields or None, seconds between, expected level, text in a reason)
CASES = [
    ({}, None, 0, "ok", None),
    ({"ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 5}, None, 0, "ok", None),
    ({"ecc_uncorrected_volatile": 1}, None, 0, "fail", "volatile double-bit ECC errors: 1"),
    ({"retired_pages_sbe": 40, "retired_pages_dbe": 23}, None, 0, "fail", "retired pages 63 >= 63"),
    ({"retired_pages_sbe": 40, "retired_pages_dbe": 22}, None, 0, "ok", None),
    ({"retired_pages_pending": True}, None, 0, "warn", "page retirement pending"),
    ({"remapped_rows_failure": True}, None, 0, "fail", "row remapping failed"),
    ({"remapped_rows_uncorrectable": 512}, None, 0, "warn", "uncorrectable row remaps 512 >= 512"),
    ({"remapped_rows_uncorrectable": 511}, None, 0, "ok", None),
    ({"remapped_rows_pending": True}, None, 0, "warn", "row remap pending"),
    (
        {"violation_thermal_ns": 2_000_000_000},
        {"violation_thermal_ns": 1_000_000_000},
        1,
        "warn",
        "thermal violation time grew by 1.00 s",
    ),
    ({"violation_power_ns": 10}, {"violation_power_ns": 5}, 1, "warn", "power violation"),
    ({"violation_power_ns": 5}, {"violation_power_ns": 5}, 1, "ok", None),
    ({"violation_power_ns": 5}, {"violation_power_ns": 50}, 1, "ok", None),  # counter reset: no guess
    ({"violation_power_ns": 50}, None, 0, "ok", None),  # no history: growth unknown
    ({"violation_power_ns": 50}, {}, 1, "ok", None),  # previous reading lacked the field
]


@pytest.mark.parametrize(("cur", "prev", "dt", "level", "text"), CASES)
def test_counter_rules(cur: dict, prev: dict | None, dt: float, level: str, text: str | None) -> None:
    findings = gpu_findings(gpu(**cur), gpu(**prev) if prev is not None else None)
    got, reasons = summarise(findings)
    assert got == level
    if text is None:
        assert reasons == []
    else:
        assert any(text in r for r in reasons), reasons


GEN5_X16 = {"pcie_link_gen": 5, "pcie_link_width": 16}  # allows 1e-12 * 32e9 * 60 * 16 = 30.72/min


@pytest.mark.parametrize(
    ("counter", "link", "base", "window", "level", "text"),
    [
        (40, GEN5_X16, 0, 60, "warn", "pcie replays 40.0/min above 30.7/min for gen5 x16"),
        (30, GEN5_X16, 0, 60, "ok", None),
        (61, GEN5_X16, 0, 120, "ok", None),  # 30.5/min
        (500, GEN5_X16, 0, 59, "ok", None),  # window too short for a per-minute verdict
        (1, GEN5_X16, 0, 1, "ok", None),  # one replay in one second is not "60 a minute"
        (10, {"pcie_link_gen": 3, "pcie_link_width": 8}, 0, 60, "warn", "above 3.8/min for gen3 x8"),
        (900, {"pcie_link_gen": None, "pcie_link_width": 16}, 0, 60, "ok", None),  # link unknown: no limit
        (900, GEN5_X16, None, 60, "ok", None),  # no baseline
        (5, GEN5_X16, 900, 60, "ok", None),  # counter reset
    ],
)
def test_pcie_replay_rate(
    counter: int, link: dict, base: int | None, window: float, level: str, text: str | None
) -> None:
    got, reasons = summarise(pcie_findings(gpu(pcie_replay_counter=counter, **link), base, window))
    assert got == level
    assert (text is None and not reasons) or any(text in r for r in reasons), reasons


def as_read(r: GpuReading) -> GpuReading:
    return r


def links(replay: int, recovery: int, crc: int = 0) -> list[NvLink]:
    return [
        NvLink(link=0, active=True, replay_errors=0, recovery_errors=0, crc_flit_errors=0),
        NvLink(link=1, active=True, replay_errors=replay, recovery_errors=recovery, crc_flit_errors=crc),
    ]


@pytest.mark.parametrize(
    ("before", "after", "level", "text"),
    [
        (links(3, 0), links(3, 0), "ok", None),  # old errors, no growth
        (links(3, 0), links(5, 0), "fail", "nvlink 1 replay errors grew by 2"),
        (links(0, 0), links(0, 1), "fail", "nvlink 1 recovery errors grew by 1"),
        (links(0, 0), links(0, 0, crc=9), "ok", None),  # CRC counts are not a failure rule
    ],
)
@pytest.mark.parametrize(
    ("shape_before", "shape_after"),
    [(as_read, as_read), (compact_gpu, compact_gpu), (as_read, compact_gpu), (compact_gpu, as_read)],
    ids=["read-read", "published-published", "read-published", "published-read"],
)
def test_nvlink_growth(
    before: list[NvLink],
    after: list[NvLink],
    level: str,
    text: str | None,
    shape_before: Callable[[GpuReading], GpuReading],
    shape_after: Callable[[GpuReading], GpuReading],
) -> None:
    """Either reading may be the published form, where a link counting no error is not listed."""
    got, reasons = summarise(gpu_findings(shape_after(gpu(nvlink=after)), shape_before(gpu(nvlink=before))))
    assert got == level
    assert (text is None and not reasons) or any(text in r for r in reasons)


def test_published_reading_with_no_errors_then_a_link_counting_replays_fails() -> None:
    """The published form lists nothing while every link is clean: a link that starts counting still fails."""
    clean = compact_gpu(gpu(nvlink=links(0, 0)))
    assert clean.nvlink is None
    got, reasons = summarise(gpu_findings(compact_gpu(gpu(nvlink=links(2, 0))), clean))
    assert got == "fail" and reasons == ["nvlink 1 replay errors grew by 2"]


def test_first_sample_with_old_nvlink_errors_is_not_a_failure() -> None:
    assert summarise(gpu_findings(gpu(nvlink=links(100, 4)), None))[0] == "ok"


def test_backend_flagged_failure_survives() -> None:
    r = gpu(health="fail", health_reasons=["gpu lost: GPU is lost"])
    assert summarise(gpu_findings(r, None)) == ("fail", ["gpu lost: GPU is lost"])


def test_reasons_fail_first_and_deduplicated() -> None:
    r = gpu(remapped_rows_pending=True, ecc_uncorrected_volatile=2)
    level, reasons = summarise(gpu_findings(r, None) + gpu_findings(r, None))
    assert level == "fail" and reasons == [
        "volatile double-bit ECC errors: 2",
        "row remap pending (reset the GPU to apply)",
    ]


@pytest.mark.parametrize(
    ("gen", "width", "limit"), [(5, 16, 30.72), (4, 16, 15.36), (3, 8, 3.84), (None, 16, None), (9, 16, None)]
)
def test_pcie_limit(gen: int | None, width: int, limit: float | None) -> None:
    got = pcie_replay_limit_per_min(gen, width)
    assert got == (pytest.approx(limit) if limit is not None else None)
