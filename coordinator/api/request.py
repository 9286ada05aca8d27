"""Reading a write's request: its body bounded as it arrives, no query parameters, JSON into its Struct."""

from __future__ import annotations

from typing import TypeVar

import msgspec
from aiohttp import web

from coordinator.api.auth import by_refused
from coordinator.api.errors import ApiError
from events.errors import validation_problem

MAX_SMALL_BODY = 4096  # bodies of a few fields (scale, delete, an alias)
_CHUNK = 64 * 1024

T = TypeVar("T", bound=msgspec.Struct)


def _invalid(exc: msgspec.ValidationError, hint: str) -> ApiError:
    field = validation_problem(exc).field.lstrip(".") or None
    if field == "by":
        return by_refused()
    return ApiError(400, f"invalid request: {exc}", field=field, hint=hint)


def decode_json(raw: bytes, kind: type[T], hint: str) -> T:
    """A JSON body (empty means every default), or ApiError 400 naming the field at fault."""
    try:
        return msgspec.json.decode(raw if raw.strip() else b"{}", type=kind)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, hint) from None
    except msgspec.DecodeError as exc:
        raise ApiError(400, f"request body is not JSON: {exc}", hint="send Content-Type: application/json") from None


def no_query(request: web.Request) -> None:
    """The writes take no query parameters (``?by=`` was one: the caller's token says who asks now)."""
    if "by" in request.query:
        raise by_refused()
    if request.query:
        name = next(iter(request.query))
        raise ApiError(400, f"unknown query parameter {name!r}", field=name, hint="this route takes no query")


async def read_bounded(request: web.Request, limit: int, what: str) -> bytes:
    """The body, refused with 413 past ``limit`` bytes (checked as it arrives, whatever Content-Length says)."""

    def too_large(size: int | str) -> ApiError:
        return ApiError(413, f"the {what} is {size} bytes; the limit is {limit}", field=what)

    if request.content_length is not None and request.content_length > limit:
        raise too_large(request.content_length)
    chunks, size = [], 0
    while chunk := await request.content.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise too_large(f"more than {limit}")
        chunks.append(chunk)
    return b"".join(chunks)
