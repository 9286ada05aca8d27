"""PromQL from dcgm-exporter's names to OpenTelemetry's as Prometheus stores them, and NVIDIA's dashboard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myolo.common.metrics.grafana import translate_dashboard
from myolo.common.metrics.promql import PromqlError, translate, translate_template

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("dcgm", "otel"),
    [
        ("DCGM_FI_DEV_GPU_TEMP", 'hw_temperature_celsius{hw_sensor_location="gpu", hw_type="gpu"}'),
        # the unit: the stored ratio times 100 is the scraped percentage
        ("DCGM_FI_DEV_GPU_UTIL", '(hw_gpu_utilization{hw_gpu_task="general"} * 100)'),
        (
            'avg by (gpu, Hostname) (DCGM_FI_DEV_FB_USED{gpu="3", instance=~"$instance"})',
            'avg by (myolo_gpu_index, host_name) ((hw_gpu_memory_usage_bytes{myolo_gpu_index="3", '
            'instance=~"$instance"} / 1048576))',
        ),
        # a range vector: the factor goes outside a function that scales with its input
        (
            "sum(rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[5m] offset 1m))",
            'sum((rate(hw_energy_joules_total{hw_type="gpu"}[5m] offset 1m) * 1000))',
        ),
        # ... and is not needed where a count of changes is asked
        ("changes(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[1h])", 'changes(hw_energy_joules_total{hw_type="gpu"}[1h])'),
        # values that differ between the two: ok/warn/fail against hw.state's ok/degraded/failed
        ('myolo_gpu_health{state="warn"} == 1', 'hw_status{hw_state="degraded", hw_type="gpu"} == 1'),
        (
            'myolo_gpu_xid_errors_total{xid="79"}',
            'hw_errors_total{myolo_gpu_xid="79", error_type="xid", hw_type="gpu"}',
        ),
        # a fixed attribute the query names already is not added twice
        ('DCGM_FI_DEV_GPU_TEMP{hw_type="gpu"}', 'hw_temperature_celsius{hw_type="gpu", hw_sensor_location="gpu"}'),
        # what is not ours passes through untouched, labels of other metrics included
        ("sum by (gpu) (rate(node_cpu_seconds_total[5m]))", "sum by (gpu) (rate(node_cpu_seconds_total[5m]))"),
        (
            "label_values(DCGM_FI_DEV_GPU_TEMP, gpu)",
            'label_values(hw_temperature_celsius{hw_sensor_location="gpu", hw_type="gpu"}, myolo_gpu_index)',
        ),
    ],
)
def test_expressions_are_rewritten_to_the_stored_otel_names_with_units_and_labels(dcgm, otel):
    t = translate(dcgm)
    assert t.text == otel
    assert t.notes == []


def test_what_cannot_be_rewritten_safely_is_said():
    t = translate("quantile_over_time(0.9, DCGM_FI_DEV_GPU_UTIL[10m])")
    assert "multiply the result by 100 by hand" in t.notes[0]
    t = translate('myolo_gpu_health{state=~"warn|fail"}')
    assert "rewrite its values by hand" in t.notes[0]
    t = translate('label_replace(DCGM_FI_DEV_GPU_TEMP, "g", "$1", "gpu", "(.*)")')
    assert 'label "gpu" is left as written' in t.notes[0]


@pytest.mark.parametrize("bad", ["DCGM_FI_DEV_GPU_TEMP{gpu=", "sum(DCGM_FI_DEV_GPU_TEMP", "a ~ b", "x" * 70_000])
def test_unreadable_expressions_are_refused_with_the_reason(bad):
    with pytest.raises(PromqlError):
        translate(bad)


def test_legend_templates_follow_the_labels_of_their_query():
    labels = translate("DCGM_FI_DEV_GPU_UTIL").labels
    assert labels["gpu"] == "myolo.gpu.index" and labels["Hostname"] == "host.name"
    assert translate_template("GPU {{gpu}} on {{ Hostname }} ({{instance}})", labels) == (
        "GPU {{myolo_gpu_index}} on {{host_name}} ({{instance}})"
    )
    assert translate_template("GPU {{gpu}}", {}) == "GPU {{gpu}}"


def test_nvidias_dashboard_is_rewritten_query_by_query_and_nothing_else_changes():
    raw = (DATA / "dcgm-exporter-dashboard.json").read_text()
    before = json.loads(raw)
    result = translate_dashboard(raw)
    after = result.dashboard
    assert result.notes == []
    exprs = [t["expr"] for p in after["panels"] for t in p.get("targets", [])]
    assert len(exprs) == 8 and not any("DCGM_" in e for e in exprs)
    assert exprs[0] == (
        'hw_temperature_celsius{instance=~"$instance", myolo_gpu_index=~"$gpu", hw_sensor_location="gpu", '
        'hw_type="gpu"}'
    )
    assert exprs[4].startswith("(myolo_gpu_clock_hertz{") and exprs[4].endswith("/ 1000000) * 1000000")
    assert exprs[7] == (
        'myolo_gpu_engine_active{instance=~"$instance", myolo_gpu_index=~"$gpu", myolo_gpu_engine="tensor"}'
    )
    legends = {t.get("legendFormat") for p in after["panels"] for t in p.get("targets", [])}
    assert legends == {"GPU {{myolo_gpu_index}}", ""}
    variables = {v["name"]: v for v in after["templating"]["list"]}
    assert variables["gpu"]["query"].endswith(", myolo_gpu_index)")
    assert variables["gpu"]["definition"] == variables["gpu"]["query"]
    assert result.rewritten == 12  # 8 panel queries, 2 variables x (query, definition)

    def strip(d):  # the dashboard with its queries and legends taken out: must be the same as before
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k not in ("expr", "query", "definition", "legendFormat")}
        return [strip(v) for v in d] if isinstance(d, list) else d

    assert strip(after) == strip(before)


@pytest.mark.parametrize("bad", ["[1, 2]", "{not json", "x" * (16 * 1024 * 1024 + 1)])
def test_a_file_that_is_not_a_dashboard_is_refused(bad):
    with pytest.raises(ValueError):
        translate_dashboard(bad)
