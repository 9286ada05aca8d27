"""The one way a route answers JSON: the body encoded by msgspec, whether a Struct or plain builtins.

msgspec writes what ``msgspec.to_builtins`` would (a Struct's ``omit_defaults`` holds, a NaN is ``null``), so
every route's answer has the shape its answer Struct declares and ``myoloctl`` decodes it into the same Struct.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from aiohttp import web

JSON = "application/json"


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """``body`` (a msgspec Struct, or dicts, lists and scalars) as a JSON answer with ``status``."""
    return web.Response(body=msgspec.json.encode(body), status=status, headers=headers, content_type=JSON)
