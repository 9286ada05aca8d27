"""myoloctl's tables: health coloured on a terminal, plain aligned columns when piped."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from myolo.coordinator.cli import render

NODES = {
    "now": 100.0,
    "items": [
        {
            "node_id": "node-1",
            "liveness": "Ready",
            "health": "ok",
            "health_reasons": [],
            "gpus": [{"health": "ok"}],
            "gpu_count": 1,
            "last_seen_age_s": 0.4,
            "backend": "sim",
            "agent_version": "4.0.0",
            "cordoned": False,
        },
        {
            "node_id": "node-22",
            "liveness": "Lost",
            "health": "fail",
            "health_reasons": ["gpu 0: XID 79"],
            "gpus": [{"health": "fail"}, {"health": "ok"}],
            "gpu_count": 2,
            "last_seen_age_s": 754.0,
            "backend": "nvml",
            "agent_version": None,
            "cordoned": True,
            "cordon": {"reason": "node lost", "by": "auto:lost"},
        },
    ],
}


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    if terminal:
        return Console(file=buf, force_terminal=True, color_system="standard", width=160), buf
    return Console(file=buf, force_terminal=False, width=40, soft_wrap=True), buf  # as myoloctl makes it


def test_piped_table_is_plain_aligned_and_never_wrapped() -> None:
    console, buf = _console(terminal=False)
    render.print_nodes(console, NODES)
    lines = buf.getvalue().splitlines()
    assert lines == [
        "NAME      STATUS          HEALTH   GPUS        LAST SEEN   BACKEND   AGENT   REASONS",
        "node-1    Ready           ok       1           0.4s        sim       4.0.0",
        "node-22   Lost,Cordoned   fail     2 (1 bad)   12m         nvml      -       gpu 0: XID 79; cordoned: node lost",
    ]  # wider than the 40-column console: piped output keeps whole lines


def test_terminal_table_colours_health_and_liveness() -> None:
    console, buf = _console(terminal=True)
    render.print_nodes(console, NODES)
    out = buf.getvalue()
    red, green, magenta = "\x1b[1;31m", "\x1b[32m", "\x1b[35m"
    assert f"{red}fail" in out and f"{red}Lost" in out
    assert f"{green}ok" in out and f"{green}Ready" in out
    assert f"{magenta}Cordoned" in out
    assert "─" in out  # the header rule of a rich table


def test_empty_fleet_says_so() -> None:
    console, buf = _console(terminal=False)
    render.print_nodes(console, {"now": 0, "items": []})
    render.print_gpus(console, {"now": 0, "items": []})
    assert buf.getvalue().splitlines() == [
        "No nodes yet (agents publish a sample every second once they run).",
        "No GPUs yet.",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "never"),
        (0.04, "0.0s"),
        (9.96, "10.0s"),
        (10.2, "10s"),
        (75, "1m15s"),
        (900, "15m"),
        (7500, "2h5m"),
        (3 * 86400 + 5, "3d"),
    ],
)
def test_age(seconds: float | None, text: str) -> None:
    assert render.age(seconds) == text


def test_numbers_and_memory_show_absence_as_a_dash() -> None:
    assert render.num(None, "W") == "-" and render.num(299.6, "W") == "300W"
    assert render.memory(None, 80 << 30) == "-"
    assert render.memory(20 << 30, 80 << 30) == "20.0/80GiB"
    assert render.reasons(["a" * 70]) == "a" * 59 + "…"
