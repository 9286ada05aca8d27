"""The ``[fleet]`` section: liveness timing and the bound on the fleet view."""

from __future__ import annotations

from typing import Annotated

import msgspec


class FleetConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A node is Suspect after ``suspect_after_intervals`` of ITS sample intervals without a sample, and Lost
    after ``lost_after_s``. ``max_nodes`` bounds the view: events of nodes beyond it are flagged, not kept."""

    lost_after_s: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    suspect_after_intervals: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 3
    request_sample_on_suspect: bool = True  # ask a node that just went Suspect for a full sample at once
    max_nodes: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10_000
    # no node is declared Lost while the coordinator cannot trust its own hearing: Kafka has not answered its
    # ingest consumer for ingest_silent_after_s, ingest is more than ingest_lag_after_s behind, or every one of
    # at least mass_silence_min_nodes live nodes fell silent at once (for at most mass_silence_max_hold_s)
    ingest_silent_after_s: Annotated[float, msgspec.Meta(gt=0)] = 3.0
    ingest_lag_after_s: Annotated[float, msgspec.Meta(gt=0)] = 3.0
    mass_silence_min_nodes: Annotated[int, msgspec.Meta(ge=2)] = 3
    mass_silence_max_hold_s: Annotated[float, msgspec.Meta(ge=0)] = 120.0
    # after Kafka answers again, Lost verdicts wait this long more: the agents reconnect with back-off (their
    # publish.retry_max_s, 5 s by default) and then send what they spooled, which shows they never stopped
    resume_grace_s: Annotated[float, msgspec.Meta(ge=0)] = 15.0
