"""Browser sessions of the dashboard: a random id in an HttpOnly, SameSite=Strict cookie, the caller kept here.

The token a person logs in with is checked once and never stored, never put in a URL or a page: the session
only remembers the token's name, and grants at most the viewer role (the dashboard only reads, so a session
cookie can never write, whoever logged in). The table is bounded (the oldest session goes first) and each
session expires on the coordinator's clock.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass

from myolo.common.clock import Clock

COOKIE = "myolo_session"
ROLE = "viewer"  # what a session may do, whatever the token's role


@dataclass(frozen=True)
class Session:
    name: str  # the token's name (who logged in)
    expires: float


class SessionTable:
    def __init__(self, clock: Clock, ttl_s: float, limit: int) -> None:
        self.clock = clock
        self.ttl_s = ttl_s
        self.limit = limit
        self._by_id: OrderedDict[str, Session] = OrderedDict()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._by_id)

    def open(self, name: str) -> str:
        """A new session for the token ``name``; returns its id (the cookie's value)."""
        self._expire()
        while len(self._by_id) >= self.limit:
            self._by_id.popitem(last=False)
            self.evicted += 1
        sid = secrets.token_urlsafe(32)
        self._by_id[sid] = Session(name, self.clock.now() + self.ttl_s)
        return sid

    def who(self, sid: str | None) -> tuple[str, str] | None:
        """(token name, role) of a live session, else None (unknown, expired or malformed id)."""
        if not sid or len(sid) > 64:
            return None
        found = self._by_id.get(sid)
        if found is None:
            return None
        if found.expires <= self.clock.now():
            del self._by_id[sid]
            return None
        return found.name, ROLE

    def close(self, sid: str | None) -> None:
        if sid:
            self._by_id.pop(sid, None)

    def _expire(self) -> None:
        now = self.clock.now()
        for sid in [s for s, v in self._by_id.items() if v.expires <= now]:
            del self._by_id[sid]


def cookie_header(sid: str, max_age_s: float, secure: bool) -> str:
    """The Set-Cookie value: HttpOnly (no script reads it), SameSite=Strict (no other site sends it), /ui only."""
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={sid}; Path=/ui; Max-Age={int(max_age_s)}; HttpOnly; SameSite=Strict{flags}"


def cleared_cookie(secure: bool) -> str:
    flags = "; Secure" if secure else ""
    return f"{COOKIE}=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict{flags}"
