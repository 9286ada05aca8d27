"""The core's routes: ``/healthz``, ``/openapi.json``, ``/v1/leader`` and ``/metrics``. Components add their own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web

from myolo.common.metrics.text import CONTENT_TYPE
from myolo.coordinator.api.answers import LeaderAnswer
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.core.leadership import LeaderInfo


class CoreView(Protocol):
    """What the core's routes need of a coordinator."""

    instance_id: str
    started: asyncio.Event  # set once the state topics are read and every component runs

    @property
    def is_leader(self) -> bool: ...

    def leader_info(self) -> LeaderInfo | None:
        """This coordinator's term while it leads, else the last term recorded by anyone (None: never)."""

    def generations(self) -> tuple[int, int | None]:
        """(the leader group's generation this member last joined, the generation the known term was granted in)."""

    def metrics_text(self) -> str:
        """The Prometheus page of this coordinator (``coordinator/core/metrics.py``)."""


def leader_answer(info: LeaderInfo | None, instance_id: str, is_leader: bool) -> LeaderAnswer:
    """The leader (or the last one recorded; all None before any term) and whether that is the answerer."""
    return LeaderAnswer(
        leader_id=info.instance_id if info else None,
        epoch=info.epoch if info else None,
        api_url=info.api_url if info else None,
        instance_id=instance_id,
        is_leader=is_leader,
    )


def routes(core: CoreView, document: dict[str, Any], health: list[Callable[[], dict[str, Any]]]) -> list[web.RouteDef]:
    async def healthz(request: web.Request) -> web.Response:
        ready = core.started.is_set()
        body: dict[str, Any] = {}
        for part in health:
            body.update(part())
        group_generation, term_generation = core.generations()
        body.update(
            status="ok" if ready else "starting",
            instance_id=core.instance_id,
            role="leader" if core.is_leader else "standby",
            group_generation=group_generation,
            term_generation=term_generation,
        )
        return json_response(body, status=200 if ready else 503)

    async def openapi(request: web.Request) -> web.Response:
        return json_response(document)

    async def leader(request: web.Request) -> web.Response:
        return json_response(leader_answer(core.leader_info(), core.instance_id, core.is_leader))

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=core.metrics_text().encode(), headers={"Content-Type": CONTENT_TYPE})

    return [
        web.get("/healthz", healthz),
        web.get("/openapi.json", openapi),
        web.get("/v1/leader", leader),
        web.get("/metrics", metrics),
    ]
