"""Shared building blocks of payloads: constrained number types and the base Struct.

Constraints live in the types, so msgspec rejects impossible values (140% utilisation, negative memory)
while decoding, with an error that names the field. Optional fields default to ``None`` and are omitted
when encoded: a reading the hardware does not support is *absent*, never zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType
from typing import Annotated, Literal

import msgspec

Percent = Annotated[float, msgspec.Meta(ge=0.0, le=100.0, description="0..100 %")]
Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0, description="0..1")]
NonNegInt = Annotated[int, msgspec.Meta(ge=0)]
NonNegFloat = Annotated[float, msgspec.Meta(ge=0.0)]
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
# a host name or an IP address (IPv6 bare or bracketed): what another node connects to
Host = Annotated[str, msgspec.Meta(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9_.:\[\]-]+$")]
# an http(s) URL of a service a node runs, without credentials, query or fragment: a client appends its paths
HttpUrl = Annotated[
    str, msgspec.Meta(min_length=8, max_length=512, pattern=r"^https?://[A-Za-z0-9_.:\[\]-]+(/[A-Za-z0-9_.~%/-]*)?$")
]
Health = Literal["ok", "warn", "fail"]
"""How healthy something is (a GPU, a node, one of the agent's own checks): the one scale of the tree."""
HEALTH_RANK = MappingProxyType({"ok": 0, "warn": 1, "fail": 2})


def worst_health(levels: Iterable[Health]) -> Health:
    """The most severe of ``levels``; ``ok`` for none."""
    return max(levels, key=HEALTH_RANK.__getitem__, default="ok")


class Payload(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=False):
    """Base of every event payload. Unknown fields (from a newer minor version) are ignored on decode."""
