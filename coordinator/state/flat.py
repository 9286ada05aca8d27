"""Reading a record written flat, before its fields were split into ``spec`` and ``status``.

Such records stay on a compacted topic until their key is written again, and in backup archives: a coordinator
that could not read them would start without the jobs and rollouts they hold. The named fields go to ``spec``,
the others (but the record's own) to ``status``; the result is validated as the record itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import msgspec

T = TypeVar("T", bound=msgspec.Struct)


def split_flat(raw: bytes, cls: type[T], own: frozenset[str], spec: Mapping[str, str]) -> T:
    """``raw``, a flat JSON object, as ``cls``: ``own`` fields kept, ``spec`` fields (old name -> new name) moved
    into ``spec``, the rest into ``status``. Raises msgspec's errors (or TypeError) when it is neither shape."""
    flat = msgspec.json.decode(raw)
    if not isinstance(flat, dict) or ("spec" in flat and "status" in flat):
        raise TypeError("not a flat record")
    record = {k: v for k, v in flat.items() if k in own}
    record["spec"] = {new: flat[old] for old, new in spec.items() if old in flat}
    record["status"] = {k: v for k, v in flat.items() if k not in own and k not in spec}
    return msgspec.convert(record, cls)
