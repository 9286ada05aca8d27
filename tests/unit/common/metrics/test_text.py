"""The Prometheus text format as written by hand: escapes, values, counters without ``_total``, and what
prometheus_client's own parser reads back."""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from myolo.common.metrics.mapping import load
from myolo.common.metrics.text import escape_label, format_value, render_family


def test_values_and_escapes_are_written_as_the_format_says():
    assert [format_value(v) for v in (0, 81920.0, 0.25, 1e20, math.nan, math.inf, -math.inf)] == [
        "0",
        "81920",
        "0.25",
        "1e+20",
        "NaN",
        "+Inf",
        "-Inf",
    ]
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def test_a_family_reads_back_with_prometheus_clients_parser_and_keeps_dcgms_counter_name():
    spec = load().by_name()["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    out: list[str] = []
    render_family(spec, ("gpu", "modelName"), [(("0", 'H100 "SXM"'), 123456.0), (("1", "H100"), 0.5)], out)
    text = "\n".join(out) + "\n"
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text
    assert '\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",modelName="H100 \\"SXM\\""} 123456\n' in text
    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    assert [(s.labels["modelName"], s.value) for s in samples] == [('H100 "SXM"', 123456.0), ("H100", 0.5)]


def test_a_family_without_series_writes_nothing():
    out: list[str] = []
    render_family(load().by_name()["DCGM_FI_DEV_ENC_UTIL"], ("gpu",), [], out)
    assert out == []
