"""The ``[cordons]`` section: what the leader cordons on its own."""

from __future__ import annotations

from typing import Annotated

import msgspec


class CordonsConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """FAIL-class faults and Lost nodes are always cordoned; WARN only with ``act_on_warn``."""

    act_on_warn: bool = False
    drain_after_auto_cordon: bool = True  # send the node a signed `drain` once it is cordoned automatically
    # lift an automatic Lost cordon when the node's delayed samples show it never stopped (its silence was the
    # bus's); operator cordons and fault cordons never clear by themselves
    auto_uncordon_lost: bool = True
    queue_size: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10_000  # automatic decisions waiting
