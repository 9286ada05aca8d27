"""The dashboard component: ``/ui`` on every coordinator (leader or standby, from the state it holds).

It reads the other components only through their ``dashboard()`` declarations (``core/dashboard.py``) and keeps
what none of them keeps: a bounded ring of recent GPU samples per node and of progress points per job. The core
tells it which component changed; it tells the browsers following its live feed (``sse.py``).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import structlog

from myolo.coordinator.core.component import Component, RouteSet
from myolo.coordinator.core.context import Context
from myolo.coordinator.core.dashboard import Dashboard, Panel
from myolo.coordinator.fleet.interface import FleetNodes, Transition
from myolo.coordinator.ui import assets, routes, views
from myolo.coordinator.ui.config import UiConfig
from myolo.coordinator.ui.history import JobRings, NodeRings
from myolo.coordinator.ui.sessions import COOKIE, SessionTable
from myolo.coordinator.ui.sse import Feed
from myolo.events.bus import RecordInfo
from myolo.events.envelope import Event
from myolo.events.payloads import NodeSample, TrainingProgress

log = structlog.get_logger("myolo.coordinator.ui")


class Ui(Component):
    name = "ui"
    config = UiConfig
    requires = (FleetNodes,)
    consumes = (NodeSample, TrainingProgress)
    openapi = Path(__file__).with_name("openapi.yaml")

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg: UiConfig = ctx.config
        self.cfg = cfg
        self.clock = ctx.clock
        self.boards = ctx.boards
        self.sessions = SessionTable(ctx.clock, cfg.session_ttl_s, cfg.max_sessions)
        self.nodes = NodeRings(cfg.history_s, cfg.history_step_s, cfg.max_nodes)
        self.jobs = JobRings(cfg.job_points, cfg.max_jobs)
        self.feed = Feed(cfg.max_streams)
        self.assets = assets.load()
        self.fleet = ctx.need(FleetNodes)
        ctx.boards.listen(self.feed.changed)
        # liveness verdicts come on the fleet's ticks, which the core does not report: the fleet tells us
        fleet_name = getattr(type(self.fleet), "name", "fleet")
        self.fleet.on_liveness(lambda t: self._liveness(fleet_name, t))

    def _liveness(self, fleet_name: str, t: Transition) -> None:
        self.feed.changed(fleet_name)
        if t.after == "Lost":
            self.feed.changed(self.name)

    async def on_event(self, event: Event, info: RecordInfo) -> None:
        data, now = event.data, self.clock.now()
        if isinstance(data, NodeSample):
            if self.fleet.node(data.node_id) is not None:  # only nodes the fleet keeps (it bounds them)
                self.nodes.add(data, now)
        elif isinstance(data, TrainingProgress):
            self.jobs.add(data, now)

    def read(self, page: str, key: str | None) -> msgspec.Struct | None:
        """One page's data by its name (any component's), None when there is no such page or key."""
        found = self.boards.panel(page)
        if found is None:
            return None
        _, panel = found
        if panel.keyed and not key:
            return None
        return panel.read(key)

    def dashboard(self) -> Dashboard:
        return Dashboard(
            panels=(
                Panel("node-history", "", lambda key: views.node_history(self.nodes, key), keyed=True),
                Panel("job-history", "", lambda key: views.job_history(self.jobs, key), keyed=True),
                Panel("events", "Events", lambda _: views.timeline(self.boards, self.cfg.timeline_limit)),
            )
        )

    def api(self) -> RouteSet | None:
        if not self.cfg.enabled:
            return None
        return RouteSet(
            routes.routes(self),
            self.openapi,
            open_routes=routes.OPEN,
            session=lambda request: self.sessions.who(request.cookies.get(COOKIE)),
        )

    def stats(self) -> dict[str, int]:
        return {
            "ui_sessions": len(self.sessions),
            "ui_streams": len(self.feed.streams),
            "ui_node_rings": len(self.nodes.rings),
        }
