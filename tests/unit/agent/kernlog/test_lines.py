"""Bytes in any chunks become lines; a line without an end costs at most ``max_bytes``."""

from __future__ import annotations

from myolo.agent.kernlog.lines import LineSplitter


def test_lines_across_chunks_and_several_in_one() -> None:
    s = LineSplitter()
    assert s.feed(b"ab") == []
    assert s.feed(b"c\nde\nf") == [b"abc", b"de"]
    assert s.feed(b"\n") == [b"f"]
    assert s.flush() == []


def test_a_long_line_is_cut_and_its_tail_dropped_up_to_its_newline() -> None:
    s = LineSplitter(max_bytes=4)
    assert s.feed(b"0123456789") == [b"0123"]
    assert s.feed(b"more tail without end" * 1000) == []
    assert len(s._buf) == 0  # nothing of the tail is kept
    assert s.feed(b"tail\nok\n") == [b"ok"]
    assert s.cut == 1


def test_what_is_left_at_the_end_is_a_line() -> None:
    s = LineSplitter()
    s.feed(b"last")
    assert s.flush() == [b"last"]
