"""A request body decoded into its Struct, or a 400 that names the field at fault and says what to send."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from coordinator.api.errors import ApiError
from events.errors import validation_problem

T = TypeVar("T")


def decode_body(raw: bytes, kind: type[T], hint: str | None = None) -> T:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        field = validation_problem(exc).field.lstrip(".") or None
        raise ApiError(400, f"invalid request body: {exc}", field=field, hint=hint) from None
    except msgspec.DecodeError as exc:
        raise ApiError(400, f"request body is not JSON: {exc}", hint=hint) from None
