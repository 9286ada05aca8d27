"""Counts of API requests by route (the pattern as registered, never the raw path), method, status and the
caller's role: ``myolo_api_requests_total`` on ``GET /metrics``. Bounded by the routes, the methods, the
statuses the API answers and the roles; a request that matched no route counts under ``unmatched``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable

from aiohttp import web

from myolo.coordinator.api.auth import CALLER, Caller

Key = tuple[str, str, str, str]  # route, method, status, role
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestCounts:
    def __init__(self) -> None:
        self.counts: Counter[Key] = Counter()

    def middleware(self) -> Callable[..., Awaitable[web.StreamResponse]]:
        @web.middleware
        async def count(request: web.Request, handler) -> web.StreamResponse:
            status = 500
            try:
                response = await handler(request)
                status = response.status
                return response
            except web.HTTPException as exc:
                status = exc.status
                raise
            finally:
                self.counts[_key(request, status)] += 1

        return count


def _key(request: web.Request, status: int) -> Key:
    info = request.match_info
    resource = None if info.http_exception is not None else info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    method = request.method if request.method in _METHODS else "other"
    who = request.get(CALLER)
    role = who.role if isinstance(who, Caller) else "none"
    return route, method, str(status), role
