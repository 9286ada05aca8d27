"""The mapping file: it loads, it covers dcgm-exporter's default counters, and a broken one is refused with
the metric and the reason named."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from myolo.common.metrics import units
from myolo.common.metrics.mapping import MappingError, load, parse

DATA = Path(__file__).parent / "data"
# in dcgm-exporter's default list but nothing this agent can read: a vGPU licence (no vGPU here)
NOT_READ = {"DCGM_FI_DEV_VGPU_LICENSE_STATUS"}


def _dcgm_counters(commented: bool) -> dict[str, str]:
    """dcgm-exporter's default-counters.csv: the fields on by default, or those listed but commented out."""
    out = {}
    for line in (DATA / "default-counters.csv").read_text().splitlines():
        text = line.strip()
        on = not text.startswith("#")
        body = text if on else text.lstrip("#").strip()
        if not body.startswith("DCGM_") or on == commented:
            continue
        name, kind, *_ = next(csv.reader([body]))
        out[name.strip()] = kind.strip()
    return out


def test_the_shipped_mapping_loads_and_names_every_default_dcgm_counter_with_its_type():
    mapping = load()
    names = mapping.by_name()
    defaults = _dcgm_counters(commented=False)
    assert len(defaults) >= 25
    for name, kind in defaults.items():
        if kind == "label":
            assert name in mapping.labels, name  # DCGM_FI_DRIVER_VERSION rides on every series as a label
        elif name not in NOT_READ:
            assert name in names, f"{name} is on by default in dcgm-exporter but not in the mapping"
            assert names[name].type == kind, name
            assert names[name].dcgm == "default", name


def test_fields_off_by_default_in_dcgm_exporter_that_the_agent_reads_are_there_under_their_dcgm_names():
    names = load().by_name()
    off = _dcgm_counters(commented=True)
    for name in (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_POWER_VIOLATION",
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "DCGM_FI_DEV_RETIRED_SBE",
        "DCGM_FI_DEV_RETIRED_DBE",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    ):
        assert name in off and names[name].dcgm == "optional", name
        if off[name] == "counter":
            assert names[name].type == "counter", name


def test_otel_names_follow_the_hw_conventions_and_their_stored_names():
    names = load().by_name()
    cases = {
        "DCGM_FI_DEV_GPU_UTIL": ("hw.gpu.utilization", "1", "hw_gpu_utilization"),
        "DCGM_FI_DEV_FB_USED": ("hw.gpu.memory.usage", "By", "hw_gpu_memory_usage_bytes"),
        "myolo_gpu_memory_limit_bytes": ("hw.gpu.memory.limit", "By", "hw_gpu_memory_limit_bytes"),
        "DCGM_FI_DEV_POWER_USAGE": ("hw.power", "W", "hw_power_watts"),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("hw.energy", "J", "hw_energy_joules_total"),
        "DCGM_FI_DEV_GPU_TEMP": ("hw.temperature", "Cel", "hw_temperature_celsius"),
        "myolo_gpu_xid_errors_total": ("hw.errors", "{error}", "hw_errors_total"),
        "myolo_gpu_health": ("hw.status", "1", "hw_status"),
    }
    for name, (otel, unit, stored) in cases.items():
        spec = names[name]
        assert (spec.otel.name, spec.otel.unit, spec.otel_prometheus_name) == (otel, unit, stored), name
    assert names["DCGM_FI_DEV_GPU_UTIL"].otel_scale == pytest.approx(0.01)
    assert names["DCGM_FI_DEV_FB_USED"].otel_scale == 1024**2
    assert names["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].otel_scale == pytest.approx(1e-3)
    assert load().labels["UUID"] == "hw.id"


_GOOD = """
[labels]
gpu = "myolo.gpu.index"
[scopes]
gpu = ["gpu"]
[[metric]]
name = "A"
type = "gauge"
unit = "%"
help = "a"
source = "gpu.util_gpu"
otel = { name = "x.util", unit = "1" }
"""


def test_a_usable_mapping_parses():
    assert parse(_GOOD).metric[0].otel_scale == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.replace('unit = "1"', 'unit = "W"'), "cannot convert '%'"),
        (lambda t: t.replace('unit = "%"', 'unit = "furlongs"'), "unknown unit 'furlongs'"),
        (lambda t: t.replace('gpu = ["gpu"]', 'gpu = ["gpu", "UUID"]'), "label 'UUID' has no entry"),
        (lambda t: t.replace('type = "gauge"', 'type = "summary"'), "type"),
        (lambda t: t.replace('type = "gauge"', 'type = "histogram"'), "a histogram needs buckets"),
        (lambda t: t + "extra = 1\n", "extra"),
        (lambda t: t + t[t.index("[[metric]]") :], "defined twice"),
        (
            lambda t: t + t[t.index("[[metric]]") :].replace('"A"', '"B"'),
            "same OpenTelemetry name and attributes as 'A'",
        ),
        (
            lambda t: t + t[t.index("[[metric]]") :].replace('"A"', '"B"').replace('unit = "1"', 'unit = "%"'),
            "one OpenTelemetry metric has one unit and one kind",
        ),
        (lambda t: t.replace("[labels]", "[labels"), "mapping.toml"),
    ],
)
def test_a_broken_mapping_is_refused_naming_the_metric_and_the_reason(change, message):
    with pytest.raises(MappingError, match=r"mapping\.toml") as exc:
        parse(change(_GOOD))
    assert message in str(exc.value)


def test_unit_conversions_and_the_names_prometheus_stores_otel_metrics_under():
    assert units.scale("MiBy", "By") == 1024**2
    assert units.scale("mJ", "J") == pytest.approx(1e-3)
    assert units.scale("ns", "s") == pytest.approx(1e-9)
    assert units.scale("{error}", "{xid}") == 1.0  # counts of things
    with pytest.raises(ValueError, match="cannot convert"):
        units.scale("W", "J")
    assert units.prometheus_name("hw.energy", "J", "counter") == "hw_energy_joules_total"
    assert units.prometheus_name("hw.errors", "{error}", "counter") == "hw_errors_total"
    assert units.prometheus_name("hw.gpu.utilization", "1", "gauge") == "hw_gpu_utilization"
    assert units.prometheus_name("myolo.spool.usage_bytes", "By", "gauge") == "myolo_spool_usage_bytes"
    assert units.prometheus_label("hw.gpu.task") == "hw_gpu_task"
