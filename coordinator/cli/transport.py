"""The HTTP under ``myoloctl``'s API client: stdlib HTTP, no event loop, no route of its own.

It is given every coordinator it may ask, in order: a read falls through to the next one when a
coordinator does not answer, and a write follows ``307`` redirects to the leader, so the CLI keeps working
while a leader dies and a standby takes over. Every request carries the caller's bearer token (see
``coordinator/cli/auth.py``), the redirected one too (the leader is a coordinator of the same cluster, named
in its signed leadership record), but never from ``https`` to plain ``http``. ``https`` URLs are verified
against ``--ca-file`` or the system's trust store. Every failure is a ``Refusal`` of the coordinator's family: an
error answer is read back into the refusal it was (``api/errors.py``), a failure here is one of the same kinds,
and ``cli/exits.py`` turns any of them into the one exit code of its kind.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Self, TypeVar

import msgspec

from myolo.coordinator.api.errors import refusal_of
from myolo.coordinator.cli import auth
from myolo.coordinator.core.errors import Forbidden, Invalid, Refusal, Unauthenticated, Unavailable

MAX_REDIRECTS = 3
T = TypeVar("T")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None  # we follow 307 ourselves, keeping the method and the body


def local_api_urls(state_dir: Path | None = None) -> list[str]:
    """API URLs of the local stack's running coordinators, in the order they were started (the local stack is
    imported only here, when no --api names the coordinators)."""
    from myolo.coordinator.localstack.broker import process, state

    try:
        stack = state.load(state_dir or state.default_state_dir())
    except Exception:  # an unreadable state file means: no local stack to talk to
        return []
    return [
        p.info["api_url"]
        for p in stack.processes
        if p.role == "coordinator" and "api_url" in p.info and process.alive(p.pid, p.marker)
    ]


def resolve_urls(api: str | None, state_dir: Path | None = None) -> list[str]:
    """--api / MYOLO_API (comma-separated), else the local stack; a refusal with a hint when there is none."""
    if api:
        urls = [u.strip().rstrip("/") for u in api.split(",") if u.strip()]
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad or not urls:
            raise Invalid(
                f"--api {api!r} is not an http(s) URL", field="--api", hint="e.g. --api http://127.0.0.1:8480"
            )
        return urls
    urls = local_api_urls(state_dir)
    if not urls:
        raise Unavailable(
            "no coordinator API given and no local stack coordinator is running",
            hint="pass --api URL (or set MYOLO_API), or start one with `myoloctl local up --nodes 2`",
        )
    return urls


class Transport:
    """Requests to the coordinators of one cluster: a read falls through, a write follows 307."""

    def __init__(self, urls: list[str], timeout: float = 5.0, token: auth.Token | None = None) -> None:
        self.urls = urls
        self.timeout = timeout
        self.token = token
        self.last_url: str | None = None  # base URL of the coordinator that answered last
        self.last_status: int | None = None  # its HTTP status (201 Created, 202 Accepted, ...)
        self._opener: urllib.request.OpenerDirector | None = None

    @classmethod
    def from_option(cls, api: str | None) -> Self:
        """The coordinators of --api (or the local stack), with the token that goes with them."""
        state_dir = Path(os.environ["MYOLO_STATE_DIR"]) if os.environ.get("MYOLO_STATE_DIR") else None
        urls = resolve_urls(api, state_dir)
        local = not api or set(urls) <= set(local_api_urls(state_dir))
        stack = (state_dir or _default_state_dir()) if local else None  # the local stack's coordinators only
        try:
            token = auth.find_token(stack)
        except auth.CredentialError as exc:
            raise Invalid(str(exc), field="token") from None
        client = cls(urls, token=token)
        client.opener()  # a bad --ca-file is named before anything is sent
        return client

    def opener(self) -> urllib.request.OpenerDirector:
        if self._opener is None:
            handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
            if any(u.startswith("https://") for u in self.urls):
                try:
                    handlers.append(urllib.request.HTTPSHandler(context=auth.tls_context()))
                except auth.CredentialError as exc:
                    raise Invalid(str(exc), field="--ca-file") from None
            self._opener = urllib.request.build_opener(*handlers)
        return self._opener

    def get(self, path: str) -> dict[str, Any]:
        return msgspec.json.decode(self._any("GET", path, None) or b"{}")

    def call(self, method: str, path: str, answer: type[T], body: object = None) -> T:
        """One request, its answer decoded into ``answer`` (a write always carries a body, even ``{}``)."""
        if method != "GET" and body is None:
            body = {}
        raw = self._any(method, path, body) or b"{}"
        try:
            return msgspec.json.decode(raw, type=answer)
        except msgspec.ValidationError as exc:
            raise Refusal(
                f"{self.last_url}{path} answered what this myoloctl cannot read: {exc}",
                field="answer",
                hint="is myoloctl older than the API? install the coordinators' version",
            ) from None

    def get_bytes(self, path: str, max_bytes: int) -> bytes:
        """A GET whose answer is not JSON (a profile's stacks) from the first URL, at most ``max_bytes``."""
        request = urllib.request.Request(self.urls[0] + path, method="GET")
        if self.token is not None:
            request.add_header("Authorization", f"Bearer {self.token.value}")
        try:
            with self.opener().open(request, timeout=self.timeout) as resp:
                body = resp.read(max_bytes + 1)
        except urllib.error.HTTPError as exc:
            raise self._api_error(exc) from None
        except OSError as exc:
            raise Unavailable(f"{self.urls[0]}: {getattr(exc, 'reason', exc)}") from None
        if len(body) > max_bytes:
            raise Refusal(f"{self.urls[0]}{path}: over {max_bytes} bytes", field="size")
        return body

    def put(self, path: str, body: object) -> dict[str, Any]:
        return self.call("PUT", path, dict[str, Any], body)

    def _any(self, method: str, path: str, body: object) -> bytes:
        reasons = []
        for base in self.urls:
            try:
                return self._follow(method, base + path, body)
            except OSError as exc:  # refused, reset, timed out: try the next coordinator
                reason = getattr(exc, "reason", exc)
                if isinstance(reason, ssl.SSLCertVerificationError):
                    raise Refusal(
                        f"{base}: its TLS certificate is not trusted: {reason.verify_message}",
                        field="--ca-file",
                        hint="pass the CA that signed the API's certificate: myoloctl --ca-file ca.pem ... "
                        "(or MYOLO_CA_FILE, or ~/.config/myolo/ca.pem)",
                    ) from None
                reasons.append(f"{base}: {reason}")
        raise Unavailable(
            "no coordinator API answered: " + "; ".join(reasons),
            hint="is the coordinator running? `myoloctl local status` lists the local stack",
        )

    def _follow(self, method: str, url: str, body: object) -> bytes:
        data = None if body is None else msgspec.json.encode(body)
        for _ in range(MAX_REDIRECTS + 1):
            request = urllib.request.Request(url, data=data, method=method)
            request.add_header("Accept", "application/json")
            if data is not None:
                request.add_header("Content-Type", "application/json")
            if self.token is not None:
                request.add_header("Authorization", f"Bearer {self.token.value}")
            try:
                with self.opener().open(request, timeout=self.timeout) as resp:
                    parts = urllib.parse.urlsplit(url)
                    self.last_url = f"{parts.scheme}://{parts.netloc}"
                    self.last_status = resp.status
                    return resp.read()
            except urllib.error.HTTPError as exc:
                if exc.code in (307, 308) and exc.headers.get("Location"):
                    url = _redirect(url, exc.headers["Location"])
                    continue
                raise self._api_error(exc) from None
        raise Unavailable(
            f"more than {MAX_REDIRECTS} redirects from {url}", hint="the coordinators disagree on who leads; retry"
        )

    def _api_error(self, exc: urllib.error.HTTPError) -> Refusal:
        """The refusal an error answer stands for, said for the person at the command line."""
        try:
            body = json.loads(exc.read() or b"{}")
        except ValueError:
            body = {}
        refusal = refusal_of(exc.code, body)
        if not isinstance(body, dict) or "error" not in body:
            refusal.error = f"HTTP {exc.code} {exc.reason} from {exc.url}"
        elif isinstance(refusal, Unauthenticated):
            if self.token is None:
                return Unauthenticated(
                    "not authenticated: no token to send", field="token", hint=auth.no_token_hint(), status=exc.code
                )
            error = f"not authenticated: the token from {self.token.source} was refused ({refusal.error})"
            hint = "it may be revoked, or made for another cluster; " + auth.no_token_hint()
            return Unauthenticated(error, field="token", hint=hint, status=exc.code)
        elif isinstance(refusal, Forbidden):
            refusal.error = f"not allowed: {refusal.error}"
        return refusal


def _redirect(url: str, location: str) -> str:
    """Where a 307 points, unless it would carry the token from https down to plain http."""
    target = urllib.parse.urljoin(url, location)
    if url.startswith("https://") and not target.startswith("https://"):
        raise Refusal(
            f"{url} redirected to {target}: the token is not sent without TLS",
            hint="every coordinator of a cluster with TLS should serve https (api.tls_cert_file)",
        )
    return target


def _default_state_dir() -> Path:
    from myolo.coordinator.localstack.broker.state import default_state_dir

    return default_state_dir()
