"""``myoloctl metrics map|translate``: the mapping as a table or the file, and the rewrite of an expression, a
Grafana dashboard and a Prometheus rule file, with notes on stderr and exit 2 for what cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from myolo.coordinator.cli.main import app

DATA = Path(__file__).parents[2] / "common" / "metrics" / "data"


def myoloctl(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "240"}, input=stdin)


def test_map_prints_each_metric_with_its_otel_name_stored_name_and_factor():
    r = myoloctl("metrics", "map", "--component", "agent")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("DCGM_FI_DEV_FB_USED "))
    assert "hw.gpu.memory.usage" in line and "hw_gpu_memory_usage_bytes" in line and "stored / 1048576" in line
    assert "UUID -> hw.id" in r.output
    toml = myoloctl("metrics", "map", "--format", "toml")
    assert toml.exit_code == 0 and "[[metric]]" in toml.output and 'name = "DCGM_FI_DEV_GPU_UTIL"' in toml.output
    parsed = json.loads(myoloctl("metrics", "map", "--format", "json").output)
    assert {m["name"] for m in parsed["metric"]} >= {"DCGM_FI_DEV_GPU_UTIL", "myolo_gpu_xid_errors_total"}


def test_translate_an_expression_and_refuse_what_is_not_promql():
    r = myoloctl("metrics", "translate", "sum by (gpu) (DCGM_FI_DEV_POWER_USAGE)")
    assert r.exit_code == 0
    assert r.stdout.strip() == 'sum by (myolo_gpu_index) (hw_power_watts{hw_type="gpu"})'
    bad = myoloctl("metrics", "translate", "DCGM_FI_DEV_POWER_USAGE{gpu=")
    assert bad.exit_code == 2 and "expression:" in bad.output
    neither = myoloctl("metrics", "translate")
    assert neither.exit_code == 2 and "either an expression or --file" in neither.output


def test_translate_nvidias_dashboard_to_a_file(tmp_path):
    out = tmp_path / "otel.json"
    r = myoloctl("metrics", "translate", "-f", str(DATA / "dcgm-exporter-dashboard.json"), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "12 queries rewritten" in r.output
    doc = json.loads(out.read_text())
    assert "hw_power_watts{" in doc["panels"][2]["targets"][0]["expr"]
    not_json = tmp_path / "x.json"
    not_json.write_text("{nope")
    assert myoloctl("metrics", "translate", "-f", str(not_json)).exit_code == 2


def test_translate_a_rule_file_rewrites_every_expr_and_notes_what_needs_a_person(tmp_path):
    rules = tmp_path / "dcgm.yml"
    rules.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "gpu",
                        "rules": [
                            {"alert": "GpuHot", "expr": "DCGM_FI_DEV_GPU_TEMP > 85", "for": "5m"},
                            {"alert": "Slow", "expr": "quantile_over_time(0.5, DCGM_FI_DEV_GPU_UTIL[10m]) < 10"},
                        ],
                    }
                ]
            }
        )
    )
    r = myoloctl("metrics", "translate", "-f", str(rules))
    assert r.exit_code == 0, r.output
    doc = yaml.safe_load(r.stdout)
    first, second = doc["groups"][0]["rules"]
    assert first == {
        "alert": "GpuHot",
        "expr": 'hw_temperature_celsius{hw_sensor_location="gpu", hw_type="gpu"} > 85',
        "for": "5m",
    }
    assert "hw_gpu_utilization" in second["expr"]
    assert "groups[0].rules[1].expr" in r.stderr and "multiply the result by 100" in r.stderr
