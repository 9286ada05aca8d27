"""Opt-in allocation snapshots: the settings' errors name the variable, and a diff finds what grew."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import msgspec
import pytest

from myolo.common import memstats
from myolo.common.errors import ConfigError
from myolo.common.memtrace import ENV_DIR, ENV_EVERY, ENV_FRAMES, MemTrace, TraceSettings, growth, settings_from_env


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
    stats = [msgspec.json.decode(line) for line in next(tmp_path.glob("unit-*.jsonl")).read_bytes().splitlines()]
    assert len(stats) == 2 and stats[1]["traced_bytes"] >= stats[0]["traced_bytes"] + (2 << 20)
    top_site = "\n".join(lines[1:8])
    assert "test_memtrace.py" in top_site and "kept.extend" in top_site


def test_the_resident_memory_is_placed_by_allocator() -> None:
    got = memstats.sample()
    assert got.rss_kib > 0 and got.anon_kib + got.brk_heap_kib + got.file_kib == got.rss_kib
    assert got.python_blocks > 0
    assert got.traced_bytes is None or got.traced_bytes >= 0
    if got.malloc_in_use is not None:  # glibc 2.33 or later
        assert got.malloc_in_use > 0 and got.malloc_free is not None and got.malloc_free >= 0
