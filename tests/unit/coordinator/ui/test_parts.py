"""The dashboard's pieces alone: the session table (bounded, expiring on the injected clock), server-sent event
framing, the rings of recent samples (bounded, NaN for what a GPU does not report), and the static files (no
inline script or style, no HTML built from strings, nothing fetched from elsewhere)."""

from __future__ import annotations

import re

import msgspec
import pytest

from myolo.common.clock import SimClock
from myolo.coordinator.ui.assets import STATIC, load, weight
from myolo.coordinator.ui.history import JobRings, NodeRings
from myolo.coordinator.ui.sessions import SessionTable, cookie_header
from myolo.coordinator.ui.sse import Changed, Feed, frame
from myolo.coordinator.ui.views import job_history
from myolo.events.payloads import GpuReading, NodeSample, TrainingProgress


async def test_sessions_expire_on_the_clock_and_the_table_is_bounded() -> None:
    clock = SimClock()
    table = SessionTable(clock, ttl_s=60, limit=3)
    first = table.open("vic")
    assert table.who(first) == ("vic", "viewer")
    assert table.who(None) is None and table.who("") is None and table.who("x" * 100) is None
    others = [table.open(f"p{i}") for i in range(3)]
    assert len(table) == 3 and table.who(first) is None and table.evicted == 1  # the oldest went first
    await clock.advance(61)
    assert all(table.who(s) is None for s in others)
    table.close(None)
    assert "HttpOnly" in cookie_header("abc", 60, secure=True) and cookie_header("abc", 60, True).endswith("Secure")


def test_an_event_is_one_data_line_whatever_the_strings_carry() -> None:
    got = frame("changed", Changed(components=["a\nb", "<script>"]))
    assert got == b'event: changed\ndata: {"components":["a\\nb","<script>"]}\n\n'
    assert got.count(b"\n") == 3
    with pytest.raises(ValueError):
        frame("bad name\n", {})


def test_a_stream_keeps_a_set_of_names_however_many_changes_come() -> None:
    feed = Feed(limit=1)
    stream = feed.join()
    assert stream is not None and feed.join() is None and feed.refused == 1
    for _ in range(10_000):
        feed.changed("fleet")
    feed.changed("jobs")
    assert stream.wake.is_set() and stream.take() == Changed(components=["fleet", "jobs"])
    assert not stream.wake.is_set() and stream.take() == Changed(components=[])
    feed.leave(stream)
    assert feed.join() is not None


def _sample(node: str, util: float | None, gpus: int = 2) -> NodeSample:
    return NodeSample(
        node_id=node,
        backend="sim",
        gpus=[
            GpuReading(index=i, uuid=f"G{i}", name="sim", util_gpu=util, mem_total_bytes=100, mem_used_bytes=25)
            for i in range(gpus)
        ],
    )


def test_a_node_ring_keeps_one_slot_per_step_and_wraps() -> None:
    rings = NodeRings(history_s=30, step_s=10, max_nodes=2)
    assert rings.capacity == 3
    for t in range(0, 60, 5):  # every 5 s: every other one is kept
        rings.add(_sample("n1", float(t)), float(t))
    ring = rings.rings["n1"]
    assert [ring.times[i] for i in ring.ordered()] == [30.0, 40.0, 50.0]
    assert ring.series(1, 0) == [30.0, 40.0, 50.0] and ring.series(0, 1) == [25.0, 25.0, 25.0]
    rings.add(_sample("n2", None), 0.0)
    assert rings.rings["n2"].series(0, 0) == [None]  # not reported: no point, not a zero
    assert rings.add(_sample("n3", 1.0), 0.0) is False and "n3" not in rings.rings  # max_nodes
    rings.add(_sample("n1", 5.0, gpus=4), 100.0)  # a node whose GPU count changed starts over
    assert rings.rings["n1"].gpus == 4 and len(rings.rings["n1"].times) == 1


def test_job_rings_keep_rank_0_and_a_bounded_number_of_jobs() -> None:
    rings = JobRings(points=2, max_jobs=2)

    def progress(job: str, rank: int, step: int) -> TrainingProgress:
        return TrainingProgress(
            job_id=job, rank=rank, world_size=2, step=step, loss=1.0, tokens_per_s=10.0, step_time_s=0.1
        )

    assert rings.add(progress("a", 1, 1), 0.0) is False
    for step in range(5):
        rings.add(progress("a", 0, step), float(step))
    assert [p[2] for p in rings.jobs["a"]] == [3, 4]
    rings.add(progress("b", 0, 1), 0.0)
    rings.add(progress("c", 0, 1), 0.0)
    assert list(rings.jobs) == ["b", "c"]
    page = job_history(rings, "c")
    assert page is not None and msgspec.json.encode(page) == b'{"job":"c","points":[[0.0,0,1,1.0,10.0]]}'
    assert job_history(rings, "unheard").points == [] and job_history(rings, None) is None


def test_the_static_files_hold_no_inline_script_no_html_from_strings_and_nothing_remote() -> None:
    assets = load()
    assert {"index.html", "login.html", "app.js", "draw.js", "ui.css"} <= set(assets)
    for name, asset in assets.items():
        if name.endswith(".png"):
            assert asset.body.startswith(b"\x89PNG") and asset.content_type == "image/png"
            continue
        text = asset.body.decode()
        if name.endswith(".html"):
            assert re.findall(r"<script(?![^>]*\bsrc=)", text) == [], name  # every script is a file
            assert re.findall(r"\son\w+\s*=", text) == [], name  # no event handler attributes
            assert "style=" not in text and "<style" not in text, name
        if name.endswith(".js"):
            for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
                assert banned not in text, (name, banned)
        assert not re.search(r"(src|href)=\"(https?:)?//", text), name  # nothing from another origin
        assert "http://" not in text and "https://" not in text, name
    sizes = weight(assets)
    assert sizes["total"] == sum(v for k, v in sizes.items() if k != "total") and "login.html" not in sizes
    assert STATIC.is_dir()


def test_structs_of_the_pages_encode() -> None:
    """Every page answers a msgspec Struct: one encodes to JSON objects or compact arrays as declared."""
    from myolo.coordinator.fleet.dashboard import GpuTile

    tile = GpuTile(0, 1.0, 2.0, 3.0, 4.0, "ok", None, 0, False)
    assert msgspec.json.encode(tile) == b'[0,1.0,2.0,3.0,4.0,"ok",null,0,false]'
