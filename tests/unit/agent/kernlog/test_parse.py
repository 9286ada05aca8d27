"""The parser reads real ``NVRM: Xid`` lines of every XID class the agent knows, from kmsg, dmesg or the journal,
and gives nothing (never an exception) for anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myolo.agent.health.xid import FAIL_XIDS, WARN_XIDS
from myolo.agent.kernlog.parse import MAX_LINE_CHARS, parse_line, pci_key, summary

CASES = [json.loads(line) for line in (Path(__file__).parent / "nvrm_xids.jsonl").read_text().splitlines()]


def test_the_test_data_cover_every_xid_class_the_agent_knows() -> None:
    assert set(FAIL_XIDS) | set(WARN_XIDS) <= {c["xid"] for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=[f"xid{c['xid']}-{i}" for i, c in enumerate(CASES)])
def test_each_line_reads_as_its_xid_gpu_and_process(case: dict) -> None:
    found = parse_line(case["line"])
    assert found is not None
    assert (found.xid, found.bus, found.pid, found.name) == (case["xid"], case["bus"], case["pid"], case["name"])
    assert found.line.startswith("NVRM: Xid (")  # the prefix of kmsg, dmesg or the journal is not kept
    assert found.text and "pid=" not in found.text and "name=" not in found.text


def test_the_summary_says_who_ran_and_what_the_driver_said() -> None:
    assert summary(parse_line(CASES[0]["line"])) == "kernel log: pid 1927 (python3): GPU has fallen off the bus."
    assert summary(parse_line(CASES[-1]["line"])) == "kernel log: GPU has fallen off the bus."


def test_bytes_read_as_text() -> None:
    found = parse_line(CASES[0]["line"].encode() + b"\n")
    assert found is not None and found.xid == 79 and not found.line.endswith("\n")


def test_nvml_and_kernel_addresses_meet_in_one_form() -> None:
    assert pci_key("00000000:3B:00.0") == pci_key("PCI:0000:3b:00") == pci_key("0000:3b:00") == "0000:3b:00"
    assert pci_key("garbage") is None and pci_key("1ffffffff:00:00") is None


@pytest.mark.parametrize(
    "line",
    [
        "",
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
        "NVRM: Xid",
        "NVRM: Xid (PCI:0000:3b:00): 0, pid=1, name=x, zero is not an XID",
        "NVRM: Xid (PCI:0000:3b:00): 123456, too many digits",
        "NVRM: Xid (PCI:zzzz:3b:00): 79, not hex",
        "NVRM: Xid (PCI:0000:3b:00) 79 no colon",
        "\x00\xff" * 5000,
        "NVRM: Xid (" * 10_000,
    ],
)
def test_other_lines_and_hostile_ones_read_as_nothing(line: str) -> None:
    assert parse_line(line) is None
    assert parse_line(line.encode("utf-8", errors="surrogateescape")) is None


def test_a_huge_line_is_cut_before_it_is_read() -> None:
    found = parse_line("NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=p, " + "x" * 1_000_000)
    assert found is not None and found.xid == 31 and len(found.line) <= MAX_LINE_CHARS
    assert parse_line("y" * MAX_LINE_CHARS + CASES[0]["line"]) is None  # the marker beyond the cut is not seen


def test_invalid_utf8_does_not_stop_the_parser() -> None:
    found = parse_line(b"\xff\xfe[ 1.0] NVRM: Xid (PCI:0000:3b:00): 43, pid=7, name=\xc3(, Ch 00000018")
    assert found is not None and found.xid == 43 and found.pid == 7
