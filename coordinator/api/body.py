"""Every route's request body: read within a bound, decoded into its Struct, or refused naming the field.

One behaviour for every route: an empty body is ``{}`` (every default; a required field is then named as
missing), a body that is not JSON or does not fit the Struct is ``Invalid`` naming the field at fault, a ``by``
is refused (the caller's token says who writes), a body past its bound is ``TooLarge`` (checked as it arrives,
whatever Content-Length says). A write's Content-Type is checked before the route runs, by the gate
(``api/gate.py``: 415 naming the types the route takes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import msgspec

from myolo.common.errors import validation_problem
from myolo.coordinator.api.auth import by_refused
from myolo.coordinator.core.errors import Invalid, TooLarge

if TYPE_CHECKING:
    from aiohttp import web

T = TypeVar("T")
MAX_BODY = 64 * 1024  # the API's bound on a body, unless a route sets its own
MAX_SMALL_BODY = 4096  # a write that says a few words: a reason, a number of replicas
_CHUNK = 64 * 1024
_JSON_HINT = "send a JSON object with Content-Type: application/json ({} when there is nothing to say)"


def json_limit(text_bytes: int) -> int:
    """The bound on a JSON body that carries a text of ``text_bytes``: every byte may be escaped (six for one)."""
    return 6 * text_bytes + 4096


def decode_body(raw: bytes, kind: type[T], hint: str | None = None) -> T:
    """``raw`` as ``kind`` (empty: ``{}``), or ``Invalid`` naming the field at fault."""
    try:
        return msgspec.json.decode(raw if raw.strip() else b"{}", type=kind)
    except msgspec.ValidationError as exc:
        field = validation_problem(exc).field.lstrip(".") or None
        if field == "by":
            raise by_refused() from None
        raise Invalid(f"invalid request body: {exc}", field=field, hint=hint) from None
    except msgspec.DecodeError as exc:
        raise Invalid(f"request body is not JSON: {exc}", hint=hint or _JSON_HINT) from None


async def read_bounded(request: web.Request, limit: int, what: str = "request body") -> bytes:
    """The body, refused with ``TooLarge`` past ``limit`` bytes."""

    def too_large(size: int | str) -> TooLarge:
        return TooLarge(f"the {what} is {size} bytes; the limit is {limit}", field=what)

    if request.content_length is not None and request.content_length > limit:
        raise too_large(request.content_length)
    chunks, size = [], 0
    while chunk := await request.content.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise too_large(f"more than {limit}")
        chunks.append(chunk)
    return b"".join(chunks)


def no_query(request: web.Request) -> None:
    """A write takes no query parameters (a ``?by=`` is refused as a body's ``by`` is)."""
    if "by" in request.query:
        raise by_refused()
    if request.query:
        name = next(iter(request.query))
        raise Invalid(f"unknown query parameter {name!r}", field=name, hint="this route takes no query")


async def read_json(request: web.Request, kind: type[T], hint: str | None = None, limit: int = MAX_BODY) -> T:
    """A write's JSON body as ``kind``, its size and its fields checked (its content type is checked before the
    route runs, by the gate)."""
    return decode_body(await read_bounded(request, limit), kind, hint)
