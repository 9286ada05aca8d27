"""``myoloctl profile``: durations as people write them (the flame graph itself: ``profiling/test_flamegraph.py``)."""

from __future__ import annotations

import pytest

from myolo.coordinator.cli.profile import parse_duration


@pytest.mark.parametrize(("text", "seconds"), [("30", 30), ("30s", 30), ("5m", 300), ("0.5h", 1800), (" 2 min", 120)])
def test_durations_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "5 weeks", "-3s", "m"])
def test_a_bad_duration_says_the_forms_it_takes(bad: str) -> None:
    with pytest.raises(ValueError, match="write 30, 30s, 5m or 1h"):
        parse_duration(bad)
