"""Who is calling, and may they: bearer tokens, roles per route, and ``caller(request)`` for the routes.

Roles are ordered: scrape (``GET /metrics`` only: a Prometheus server's token) < viewer (reads) < operator
(cordon, uncordon, jobs: every other write) < admin (also the routes a component lists in
``RouteSet.admin_routes``). A GET or HEAD needs a viewer, any other method an operator, unless the route is
admin-only or ``/metrics``. ``/healthz``, ``/openapi.json`` and a component's ``open_routes`` (the
dashboard's login form and its pages and assets, which hold no data) answer without a token: a load
balancer or systemd probe has none, and neither says more than that the coordinator runs (and which role it
has) or what the API looks like, which is public in the repository anyway.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web

from myolo.coordinator.api.tokens import MAX_TOKEN, RANK, Role, TokenStore, TokensUnavailable
from myolo.coordinator.core.errors import Forbidden, Invalid, Unauthenticated, Unavailable

OPEN_PATHS = frozenset({"/healthz", "/openapi.json"})
SCRAPE_PATHS = frozenset({"/metrics"})  # all a scrape token may read
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Caller:
    """Who asks (a token's name; ``anonymous`` only where ``api.auth = "none"``) and their role."""

    name: str
    role: Role

    @property
    def by(self) -> str:
        """What a write records as its author: an operator's decision, named by the caller's token."""
        return f"operator:{self.name}"


CALLER = web.RequestKey("myolo_caller", Caller)  # where the gate puts the caller on a request


def caller(request: web.Request) -> Caller:
    """The authenticated caller of this request (set by the API's middleware before any route runs)."""
    who = request.get(CALLER)
    if not isinstance(who, Caller):
        raise RuntimeError("no caller on this request: the API's auth middleware did not run")
    return who


def set_caller(request: web.Request, who: Caller) -> None:
    request[CALLER] = who


class Authenticator:
    """Turns an ``Authorization`` header into a Caller: from a TokenStore, or everyone as admin (``none``)."""

    def __init__(self, store: TokenStore | None) -> None:
        self.store = store

    def __call__(self, request: web.Request) -> Caller:
        if self.store is None:
            return Caller(ANONYMOUS, "admin")
        return self.token_caller(bearer(request))

    def token_caller(self, token: str) -> Caller:
        """The caller a token stands for (a login form's token: the same checks as a bearer's)."""
        if self.store is None:
            return Caller(ANONYMOUS, "admin")
        if not token or len(token) > MAX_TOKEN or not token.isascii():
            raise unauthorized("the token is not valid (unknown or revoked)", invalid=True)
        try:
            entry = self.store.match(token)
        except TokensUnavailable as exc:
            raise Unavailable(f"the coordinator cannot read its API tokens: {exc}", hint="see its log") from None
        if entry is None:
            raise unauthorized("the token is not valid (unknown or revoked)", invalid=True)
        return Caller(entry.name, entry.role)


def bearer(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.strip().partition(" ")
    if not header:
        raise unauthorized("no token: send Authorization: Bearer <token>")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise unauthorized("the Authorization header is not 'Bearer <token>'", invalid=True)
    if len(token) > MAX_TOKEN or not token.isascii():
        raise unauthorized("the token is not valid (unknown or revoked)", invalid=True)
    return token


class Unauthorized(Unauthenticated):
    """401, answered with ``WWW-Authenticate: Bearer`` (RFC 6750)."""

    def __init__(self, error: str, challenge: str) -> None:
        hint = "set MYOLO_TOKEN or ~/.config/myolo/token; an admin makes tokens with `myoloctl token create`"
        super().__init__(error, field="Authorization", hint=hint)
        self.challenge = challenge


def unauthorized(error: str, *, invalid: bool = False) -> Unauthorized:
    challenge = 'Bearer realm="myolo"' + (', error="invalid_token"' if invalid else "")
    return Unauthorized(error, challenge)


def registered(app: web.Application) -> set[tuple[str, str]]:
    """(method, path pattern) of every route of the app."""
    return {(r.method, r.resource.canonical) for r in app.router.routes() if r.resource is not None}


class RoutePolicy:
    """The role each route needs, from the methods and the components' admin-only routes."""

    def __init__(
        self, admin_routes: Iterable[tuple[str, str]], app: web.Application, open_routes: Iterable[tuple[str, str]] = ()
    ) -> None:
        self.admin = {(m.upper(), p) for m, p in admin_routes}
        self.open = {(m.upper(), p) for m, p in open_routes}
        for what, routes in (("admin_routes", self.admin), ("open_routes", self.open)):
            unknown = sorted(routes - registered(app))
            if unknown:
                raise ValueError(f"{what} name routes that are not registered: {unknown}")

    @staticmethod
    def route(request: web.Request) -> tuple[str, str] | None:
        """(method, path pattern as registered) of the matched route, None when nothing matched (404/405)."""
        info = request.match_info
        if info.http_exception is not None or info.route.resource is None:
            return None
        return request.method, info.route.resource.canonical

    def is_open(self, request: web.Request) -> bool:
        route = self.route(request)
        if route is None:
            return False
        method, pattern = route
        return (method in SAFE_METHODS and pattern in OPEN_PATHS) or (
            "GET" if method == "HEAD" else method,
            pattern,
        ) in self.open

    def needs(self, method: str, pattern: str) -> Role:
        if ("GET" if method == "HEAD" else method, pattern) in self.admin:  # a HEAD is its GET without the body
            return "admin"
        if method in SAFE_METHODS and pattern in SCRAPE_PATHS:
            return "scrape"
        return "viewer" if method in SAFE_METHODS else "operator"


def require(who: Caller, need: Role, method: str, path: str) -> None:
    """403 naming the role needed, unless ``who`` has it or a higher one."""
    if RANK[who.role] < RANK[need]:
        raise Forbidden(
            f"{method} {path} needs the {need} role; token {who.name!r} has {who.role}",
            field="Authorization",
            hint=f"ask an admin for a token with role {need} (myoloctl token create NAME --role {need})",
        )


def by_refused() -> Invalid:
    """400 for a ``by`` in a write's body or query: the author of a write is its caller's token, nobody else."""
    return Invalid(
        "by is not accepted: a write is recorded under the caller's token name",
        field="by",
        hint="leave out by; `myoloctl token list` shows the token names",
    )
