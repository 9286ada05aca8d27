"""The migration planner's sums, value by value: sizes, times, rates and counts read, bad ones refused naming
the option, the bandwidth (and the seed formula's factor of 1000) and the metadata engine's memory."""

from __future__ import annotations

import pytest

from myolo.coordinator.planning.migration import (
    PlanInputError,
    bandwidth,
    metadata_memory,
    parse_count,
    parse_duration_s,
    parse_rate_bps,
    parse_size,
)


def test_50_tb_in_24_h_is_4629_6_mbps_and_the_seed_formula_is_1000_times_smaller() -> None:
    plan = bandwidth(parse_size("50TB"), parse_duration_s("24"))
    assert plan.size.bytes == 50 * 10**12 and plan.size.units == "decimal"
    assert plan.seconds == 86_400
    assert round(plan.mbps, 1) == 4629.6
    assert plan.mbps == pytest.approx(50_000 * 8000 / (24 * 3600), rel=1e-12)
    assert plan.gbps == pytest.approx(4.6296296, rel=1e-6)
    assert plan.seed_formula_value == pytest.approx(plan.mbps / 1000, rel=1e-12)  # GB x 8 / h / 3600: Gbps


@pytest.mark.parametrize(
    ("text", "size_bytes", "units"),
    [
        ("50TB", 50 * 10**12, "decimal"),
        ("500GiB", 500 * 2**30, "binary"),
        ("1.5PB", 15 * 10**14, "decimal"),
        ("2 TiB", 2 * 2**40, "binary"),
        ("1KB", 1000, "decimal"),
        ("1KiB", 1024, "binary"),
        ("1,000GB", 10**12, "decimal"),
        ("800B", 800, "decimal"),
    ],
)
def test_sizes_in_decimal_and_binary_units(text: str, size_bytes: int, units: str) -> None:
    size = parse_size(text)
    assert (size.bytes, size.units) == (size_bytes, units)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("50", "has no unit"),
        ("50Tb", "reads as bits"),
        ("1,5TB", "is not a size"),
        ("50XB", "is not a size"),
        ("0TB", "more than 0 bytes"),
    ],
)
def test_bad_sizes_name_the_option_and_the_fix(text: str, words: str) -> None:
    with pytest.raises(PlanInputError, match=words) as err:
        parse_size(text)
    assert err.value.option == "--size"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("24", 86_400), ("1.5", 5400), ("24h", 86_400), ("90m", 5400), ("2d", 172_800), ("1h30m", 5400), ("45s", 45)],
)
def test_times_as_hours_or_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["0", "-3", "soon", "", "inf", "24x"])
def test_bad_times_are_refused(text: str) -> None:
    with pytest.raises(PlanInputError) as err:
        parse_duration_s(text)
    assert err.value.option == "--hours"


@pytest.mark.parametrize(
    ("text", "bps"),
    [("10Gbps", 1e10), ("400Mbps", 4e8), ("1Gbit/s", 1e9), ("100Gb/s", 1e11), ("1.25GB/s", 1e10)],
)
def test_link_rates_are_decimal_bits_per_second(text: str, bps: float) -> None:
    assert parse_rate_bps(text) == pytest.approx(bps, rel=1e-12)


def test_a_link_takes_size_over_its_effective_rate_and_is_judged_against_the_deadline() -> None:
    plan = bandwidth(parse_size("50TB"), 86_400, efficiency=0.8, link_bps=1e10, link_given="10Gbps")
    assert plan.link is not None
    assert plan.link.effective_bps == 8e9
    assert plan.link.seconds == pytest.approx(50e12 * 8 / 8e9)  # 50,000 s = 13.9 h
    assert plan.link.meets_deadline is True
    assert plan.provision_mbps == pytest.approx(4629.6296 / 0.8, rel=1e-6)
    slow = bandwidth(parse_size("50TB"), 86_400, link_bps=1e9)
    assert (
        slow.link is not None and slow.link.meets_deadline is False and slow.link.hours == pytest.approx(111.11, 1e-4)
    )
    alone = bandwidth(parse_size("50TB"), None, link_bps=1e10)
    assert alone.mbps is None and alone.link is not None and alone.link.meets_deadline is None


def test_efficiency_outside_0_1_is_refused() -> None:
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(PlanInputError, match=r"--efficiency: .* must be in \(0, 1\]"):
            bandwidth(parse_size("1TB"), 3600, efficiency=bad)


def test_metadata_memory_is_files_times_1_kb_over_a_million() -> None:
    plan = metadata_memory(parse_count("100M"), parse_size("1KB"))
    assert (plan.files, plan.bytes, plan.gb) == (100_000_000, 10**11, 100.0)
    assert plan.gib == pytest.approx(93.1323, rel=1e-5)
    assert metadata_memory(1_000_000, parse_size("1KB")).gb == 1.0  # the sizing rule: 1 GB per million files
    assert metadata_memory(2_000_000, parse_size("1KiB")).gb == pytest.approx(2.048)


@pytest.mark.parametrize(
    ("text", "n"), [("250000000", 250_000_000), ("250,000,000", 250_000_000), ("2.5e8", 250_000_000), ("1B", 10**9)]
)
def test_file_counts(text: str, n: int) -> None:
    assert parse_count(text) == n


@pytest.mark.parametrize("text", ["0", "1.5", "many", "-3"])
def test_bad_file_counts(text: str) -> None:
    with pytest.raises(PlanInputError, match="--files"):
        parse_count(text)
