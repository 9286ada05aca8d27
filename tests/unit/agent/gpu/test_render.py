"""``myolo-agent sample`` output: the table shows absent as a dash (not 0), JSON is the payload."""

from __future__ import annotations

import io

import msgspec
from rich.console import Console

from myolo.agent.gpu.reasons import decode_clock_event_reasons, encode_clock_event_reasons
from myolo.agent.gpu.render import ABSENT, print_sample, sample_json, sample_table
from myolo.events.payloads import GpuReading, NodeSample, NvLink
from myolo.events.payloads.compact import compact_gpu


def sample() -> NodeSample:
    full = GpuReading(
        index=0,
        uuid="GPU-SIM-1",
        name="H200-sim",
        util_gpu=97.0,
        mem_total_bytes=140 << 30,
        mem_used_bytes=100 << 30,
        power_w=0.0,
        power_limit_w=700.0,
        temp_gpu_c=66.0,
        clock_event_reasons=["sw_power_cap"],
        ecc_uncorrected_volatile=0,
        ecc_corrected_volatile=0,
    )
    bare = GpuReading(
        index=1, uuid="GPU-SIM-2", name="H200-sim", health="fail", health_reasons=["gpu lost: off the bus"]
    )
    return NodeSample(
        node_id="node-a", backend="sim", gpus=[full, bare], health="fail", health_reasons=["gpu 1: gpu lost"]
    )


def render(s: NodeSample) -> str:
    buf = io.StringIO()
    Console(file=buf, width=250, color_system=None).print(sample_table(s))
    return buf.getvalue()


def test_table_rows_show_values_and_dashes_for_absent() -> None:
    out = render(sample())
    lines = [line for line in out.splitlines() if line.startswith("│")]
    row0 = [c.strip() for c in lines[0].split("│")[1:-1]]
    row1 = [c.strip() for c in lines[1].split("│")[1:-1]]
    assert row0[:7] == ["0", "H200-sim", "97", "100.0/140", "0/700", "66/" + ABSENT, ABSENT]  # 0 W stays 0
    assert row0[7] == "sw_power_cap" and row0[8] == "0/0" and row0[-1] == "ok"
    assert row1[2:13] == [ABSENT] * 11 and row1[-1] == "fail: gpu lost: off the bus"
    assert "backend=sim" in out and "fail: gpu 1: gpu lost" in out


def test_nvlink_column_reads_either_form() -> None:
    """``up/all``: from every link as read, or from the summary of a published (compact) reading."""
    links = [NvLink(link=i, active=i != 3, replay_errors=0) for i in range(18)]
    read = msgspec.structs.replace(sample().gpus[0], nvlink=links)
    for r in (read, compact_gpu(read)):
        out = render(NodeSample(node_id="node-a", backend="sim", gpus=[r]))
        row = [c.strip() for c in next(x for x in out.splitlines() if x.startswith("│")).split("│")[1:-1]]
        assert row[11] == "17/18"


def test_json_is_the_payload_without_absent_fields() -> None:
    s = sample()
    text = sample_json(s)
    back = msgspec.json.decode(text, type=NodeSample)
    assert back == s
    raw = msgspec.json.decode(text)
    assert "temp_mem_c" not in raw["gpus"][0] and raw["gpus"][0]["power_w"] == 0.0


def test_print_sample_json(capsys) -> None:
    print_sample(sample(), as_json=True)
    assert msgspec.json.decode(capsys.readouterr().out)["backend"] == "sim"


def test_clock_event_reasons_round_trip_and_unknown_bits() -> None:
    assert decode_clock_event_reasons(0) == []
    assert decode_clock_event_reasons(0x1 | 0x20 | 0x80) == [
        "gpu_idle",
        "sw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ]
    assert decode_clock_event_reasons(0x4 | 0x1000) == ["sw_power_cap", "bit_0x1000"]
    assert encode_clock_event_reasons(["hw_slowdown", "sync_boost"]) == 0x18


def test_a_narrow_terminal_drops_columns_instead_of_folding_values() -> None:
    """On an 80-column SSH session every value still reads whole; the caption names what gave way."""
    buf = io.StringIO()
    print_sample(sample(), console=Console(file=buf, width=80, color_system=None))
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= 80
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    assert rows[0][:4] == ["0", "H200-sim", "97", "100.0/140"] and rows[0][-1] == "ok"
    gpus = [row for row in rows if row[0]]
    assert len(gpus) == 2 and all(not any(row[:-1]) for row in rows if not row[0])  # only health reasons fold
    assert "hidden at this width: pcie, nvlink" in out
    wide = io.StringIO()
    print_sample(sample(), console=Console(file=wide, width=250, color_system=None))
    assert "hidden" not in wide.getvalue() and "remap" in wide.getvalue()
