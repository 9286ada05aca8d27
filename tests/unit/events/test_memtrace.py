"""Opt-in allocation snapshots: the settings' errors name the variable, and a diff finds what grew."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from events.errors import ConfigError
from events.memtrace import ENV_DIR, ENV_EVERY, ENV_FRAMES, MemTrace, TraceSettings, growth, settings_from_env


def test_off_unless_the_directory_is_set() -> None:
    assert settings_from_env({}) is None
    assert settings_from_env({ENV_DIR: ""}) is None


def test_settings_from_env(tmp_path: Path) -> None:
    got = settings_from_env({ENV_DIR: str(tmp_path), ENV_EVERY: "30", ENV_FRAMES: "4"})
    assert got == TraceSettings(tmp_path, 30.0, 4)


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [(ENV_EVERY, "soon", "seconds"), (ENV_EVERY, "0", "> 0"), (ENV_FRAMES, "x", "whole"), (ENV_FRAMES, "500", "[1")],
)
def test_bad_settings_name_the_variable(tmp_path: Path, name: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_env({ENV_DIR: str(tmp_path), name: value})
    assert err.value.key == name and reason in err.value.reason


def test_snapshots_show_what_grew(tmp_path: Path) -> None:
    was_tracing = tracemalloc.is_tracing()
    trace = MemTrace("unit", TraceSettings(tmp_path, every_s=3600.0, frames=4))
    kept: list[bytes] = []
    try:
        trace.start()  # writes snapshot 0 at once; the next periodic one is an hour away
        kept.extend(bytes(4096) for _ in range(512))  # 2 MiB held from this line
        after = trace.dump()
    finally:
        trace.stop()
        if not was_tracing:
            tracemalloc.stop()
    snaps = sorted(tmp_path.glob("unit-*.snap"))
    assert [p.name for p in snaps][-1] == after.name and len(snaps) == 2
    lines = growth(snaps[0], snaps[1], top=3)
    total_mib = float(lines[0].split()[1])
    assert total_mib >= 2.0
    top_site = "\n".join(lines[1:8])
    assert "test_memtrace.py" in top_site and "kept.extend" in top_site
