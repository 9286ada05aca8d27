"""``myoloctl plan bandwidth|metadata``: what it prints, its JSON, its help and its exit codes (the sums themselves:
``tests/unit/coordinator/planning/test_migration.py``)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from myolo.coordinator.cli.main import app


def myoloctl(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_cli_bandwidth_prints_mbps_gbps_the_correction_and_the_link() -> None:
    done = myoloctl("plan", "bandwidth", "--size", "50TB", "--hours", "24", "--link", "10Gbps", "--efficiency", "0.8")
    assert done.exit_code == 0, done.output
    assert "50TB = 50,000,000,000,000 bytes (decimal" in done.output
    assert "needed     4,629.6 Mbps = 4.630 Gbps" in done.output
    assert "provision  5,787.0 Mbps" in done.output
    assert "off by a factor of 1000" in done.output
    assert "takes 13.89 h: within the time allowed" in done.output


def test_cli_bandwidth_json_has_every_figure() -> None:
    done = myoloctl("plan", "bandwidth", "--size", "500GiB", "--hours", "90m", "-o", "json")
    assert done.exit_code == 0, done.output
    body = json.loads(done.output)
    assert body["size"] == {"given": "500GiB", "bytes": 500 * 2**30, "units": "binary"}
    assert body["mbps"] == pytest.approx(500 * 2**30 * 8 / 5400 / 1e6)
    assert "off by a factor of 1000" in body["correction"]


def test_cli_bandwidth_help_states_the_correction() -> None:
    done = myoloctl("plan", "bandwidth", "--help")
    assert done.exit_code == 0
    assert "off by a factor of 1000" in done.output and "GB x 8000 / (hours x 3600)" in done.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--size", "50Tb", "--hours", "24"), "--size: '50Tb' reads as bits"),
        (("--size", "50TB"), "--hours: give the time allowed"),
        (("--size", "50TB", "--hours", "soon"), "--hours: 'soon' is not a time"),
        (("--size", "50TB", "--link", "fast"), "--link: 'fast' is not a rate"),
        (("--size", "50TB", "--hours", "1", "--efficiency", "2"), "--efficiency: 2.0 must be in (0, 1]"),
    ],
)
def test_cli_bad_input_exits_2_naming_the_option(args: tuple[str, ...], words: str) -> None:
    done = myoloctl("plan", "bandwidth", *args)
    assert done.exit_code == 2
    assert words in done.output


def test_cli_metadata() -> None:
    done = myoloctl("plan", "metadata", "--files", "100M")
    assert done.exit_code == 0, done.output
    assert "memory     100.000 GB (93.132 GiB" in done.output and "rule of thumb" in done.output
    done = myoloctl("plan", "metadata", "--files", "1000000", "--bytes-per-file", "2KiB", "-o", "json")
    assert json.loads(done.output)["gb"] == pytest.approx(2.048)
    assert myoloctl("plan", "metadata", "--files", "lots").exit_code == 2
