"""The agent's metrics as a whole: the plan, what was published (fed by the publisher), and ``GET /metrics``.

A scrape reads the last sample and the counters already in memory: no NVML call, nothing that waits.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from aiohttp import web

from myolo.agent.metrics.observed import Observed
from myolo.agent.metrics.plan import Planned, plan, series
from myolo.agent.metrics.sources import View
from myolo.agent.publish import Publisher
from myolo.common.clock import Clock
from myolo.common.metrics.text import CONTENT_TYPE, render_family
from myolo.events.payloads import NodeSample


class AgentMetrics:
    """``last_sample`` and ``sample_monotonic`` read the sample loop's state (:class:`myolo.agent.daemon.runtime.Sampler`)."""

    def __init__(
        self,
        publisher: Publisher,
        clock: Clock,
        last_sample: Callable[[], NodeSample | None],
        sample_monotonic: Callable[[], float | None],
        *,
        hostname: str | None = None,
        planned: list[Planned] | None = None,
    ) -> None:
        self.plan = planned if planned is not None else plan()
        self.observed = Observed(clock.monotonic)
        self._publisher = publisher
        self._clock = clock
        self._last_sample = last_sample
        self._sample_monotonic = sample_monotonic
        self.hostname = hostname or socket.gethostname()
        publisher.observers.append(self.observed.observe)

    def view(self) -> View:
        return View(
            sample=self._last_sample(),
            observed=self.observed,
            spool=self._publisher.spool.stats(),
            sender=self._publisher.status,
            now_monotonic=self._clock.monotonic(),
            sample_monotonic=self._sample_monotonic(),
            hostname=self.hostname,
        )

    def render(self) -> str:
        """The Prometheus text page of the current view."""
        return render_page(self.plan, self.view())

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/metrics", self._get)]

    async def _get(self, _request: web.Request) -> web.Response:
        return web.Response(body=self.render().encode(), headers={"Content-Type": CONTENT_TYPE})


def render_page(planned: list[Planned], view: View) -> str:
    """The Prometheus text page of ``view``: every planned metric, in the scraped unit."""
    out: list[str] = []
    for p in planned:
        rows = ((labels, value * p.scale) for labels, value in series(p, view))
        render_family(p.spec, p.labels, rows, out)
    out.append("")
    return "\n".join(out)
