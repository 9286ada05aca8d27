"""What each component declares for the dashboard, and how the core hands it over: every page named once, the
changes fed from events and state records (a listener's bug costs nothing else), the timeline merged newest
first, and the gate refusing a session on a write route."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from aiohttp import web

from myolo.coordinator.api.gate import install
from myolo.coordinator.core.dashboard import Boards, Dashboard, Moment, Panel, collect
from myolo.coordinator.drift.dashboard import DriftHistory
from myolo.coordinator.drift.records import StatusRecord
from myolo.coordinator.fleet.dashboard import node_tile
from myolo.coordinator.fleet.model import FaultEntry
from myolo.coordinator.jobs import dashboard as jobs_dashboard
from myolo.coordinator.ui.component import Ui
from myolo.events.payloads import GpuReading
from myolo.events.payloads.models import FeatureDrift
from tests.support.coordinator.api_fleet import node
from tests.support.coordinator.memory_jobs import running_job
from tests.support.coordinator.offline import offline_coordinator


class Empty(msgspec.Struct):
    pass


def test_every_page_is_declared_once_and_the_menu_follows_the_components(tmp_path: Path) -> None:
    coord = offline_coordinator(tmp_path)
    names = [p.name for part in coord.boards.parts.values() for p in part.panels]
    assert len(names) == len(set(names))
    titled = [p.title for part in coord.boards.parts.values() for p in part.panels if p.title]
    assert titled == ["Fleet", "Jobs", "Registry", "Drift", "Rollouts", "Events"]
    page = Panel("x", "X", lambda _: Empty())
    a = type("A", (), {"name": "a", "dashboard": lambda self: Dashboard(panels=(page,))})()
    b = type("B", (), {"name": "b", "dashboard": lambda self: Dashboard(panels=(page,))})()
    with pytest.raises(ValueError, match="declared by both a and b"):
        collect([a, b])


def test_changes_reach_listeners_and_a_failing_listener_costs_nothing() -> None:
    boards = Boards()
    heard: list[str] = []

    def broken(name: str) -> None:
        raise RuntimeError("bug")

    boards.listen(broken)
    boards.listen(heard.append)
    boards.changed("fleet")
    assert heard == ["fleet"]


def test_the_timeline_is_merged_newest_first_and_named_by_component() -> None:
    def moments(*times: float):
        return lambda: [Moment(time=t, kind="k", subject="s", text=str(t)) for t in times]

    boards = Boards(parts={"a": Dashboard(timeline=moments(1, 5)), "b": Dashboard(timeline=moments(3))})
    got = boards.moments(2)
    assert [(m.time, m.component) for m in got] == [(5, "a"), (3, "b")]


async def test_the_core_reports_state_records_to_the_dashboard(tmp_path: Path) -> None:
    coord = offline_coordinator(tmp_path)
    heard: list[str] = []
    coord.boards.listen(heard.append)
    rec = running_job(coord.clock.now())
    coord.apply_state("myolo.state.jobs", rec.name, rec, "job")
    assert heard == ["jobs"]
    assert isinstance(coord.get(Ui), Ui)


def test_a_gpu_tile_carries_its_badges() -> None:
    now = 1000.0
    gpus = (
        GpuReading(index=0, uuid="a", name="g", util_gpu=10, clock_event_reasons=["hw_thermal_slowdown"]),
        GpuReading(index=1, uuid="b", name="g", health="fail", ecc_uncorrected_volatile=2),
    )
    faults = (
        FaultEntry(time=now - 10, kind="xid", health="fail", gpu_index=1, xid=79),
        FaultEntry(time=now - 7200, kind="xid", health="warn", gpu_index=0, xid=31),  # too old for a badge
    )
    tile = node_tile(msgspec.structs.replace(node("n1", now, recent_faults=faults), gpus=gpus), now)
    assert msgspec.json.decode(msgspec.json.encode(tile.gpus)) == [
        [0, 10, None, None, None, "ok", None, 0, True],
        [1, None, None, None, None, "fail", 79, 2, False],
    ]


def test_a_jobs_row_and_its_allocations(tmp_path: Path) -> None:
    rec = running_job(1000.0)
    row = jobs_dashboard.row(rec)
    gen = rec.status.generation
    assert gen is not None
    assert (row.replicas_min, row.replicas_current, row.replicas_max) == (
        rec.spec.job.min_replicas,
        gen.replicas,
        rec.spec.job.max_replicas,
    )
    allocs = jobs_dashboard.allocations([rec]).items
    assert [(a.node_id, a.gpus) for a in allocs] == [(m.node_id, m.gpus) for m in gen.members]


def test_drift_history_keeps_each_evaluation_once_and_bounded() -> None:
    history = DriftHistory()
    feature = FeatureDrift(feature="len", kind="numeric", count=10, psi=0.3, drifted=True)

    def status(end: float, drifted: bool) -> StatusRecord:
        return StatusRecord(
            model="m", version="1", evaluated_at=end, window_start=end - 60, window_end=end, share=1.0,
            drifted=drifted, consecutive=1, features=[feature], detections=["d1"] if drifted else [],
        )  # fmt: skip

    history.add(status(60, False))
    history.add(status(120, True))
    history.add(status(120, True))  # replayed
    [item] = history.board().items
    assert [p.time for p in item.points] == [60, 120] and item.detections == ["d1"]
    assert [m.text for m in history.moments()] == ["version 1 drifted (100% of features): len"]


def test_a_session_is_refused_on_a_write_route() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.add_routes([web.post("/ui/x", handler)])
    with pytest.raises(ValueError, match="a session may only read"):
        install(app, [], {}, sessions={("POST", "/ui/x"): lambda r: ("a", "viewer")})
