"""One XID reported by NVML and by the kernel is one fault; a source's own repeats stay faults."""

from __future__ import annotations

import pytest

from myolo.agent.kernlog.dedup import XidDedup

BUS = "0000:3b:00"


def test_the_other_sources_report_within_the_window_is_an_echo() -> None:
    d = XidDedup(window_s=30)
    assert d.first("nvml", BUS, 79, 100.0)
    assert not d.first("kernel", BUS, 79, 100.5)
    assert d.dropped == 1
    assert d.first("kernel", BUS, 79, 101.0)  # the pair is used up: a third report is a new XID


def test_either_source_may_come_first() -> None:
    d = XidDedup(window_s=30)
    assert d.first("kernel", BUS, 48, 10.0)
    assert not d.first("nvml", BUS, 48, 12.0)


def test_after_the_window_it_is_a_new_xid() -> None:
    d = XidDedup(window_s=30)
    assert d.first("nvml", BUS, 79, 100.0)
    assert d.first("kernel", BUS, 79, 130.5)


def test_another_gpu_or_code_is_another_xid() -> None:
    d = XidDedup(window_s=30)
    assert d.first("nvml", BUS, 79, 0.0)
    assert d.first("kernel", "0000:86:00", 79, 0.0)
    assert d.first("kernel", BUS, 48, 0.0)


def test_a_sources_own_repeats_are_never_dropped() -> None:
    d = XidDedup(window_s=30)
    assert all(d.first("kernel", BUS, 13, float(t)) for t in range(5))
    assert all(d.first("nvml", "0000:86:00", 31, float(t)) for t in range(5))


def test_an_unknown_address_cannot_be_matched() -> None:
    d = XidDedup()
    assert d.first("nvml", None, 79, 0.0) and d.first("kernel", None, 79, 0.0)


def test_memory_is_bounded() -> None:
    d = XidDedup(window_s=1e6, max_entries=16)
    for i in range(1000):
        d.first("kernel", f"0000:{i % 256:02x}:00", 13, float(i))
    assert d._size == 16 and sum(len(v) for v in d._open.values()) == 16


def test_a_window_of_zero_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="window_s"):
        XidDedup(window_s=0)
