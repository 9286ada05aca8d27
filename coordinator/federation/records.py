"""What crosses between cells and the federation: summaries up, intents down, each stamped with an epoch.

Both travel on topics keyed by cell, so one cell's records stay in order on one partition; that order plus
the epoch is what lets a reader refuse a deposed leader's late word (see :mod:`.fencing`).
"""

from __future__ import annotations

import msgspec


class NodeClass(msgspec.Struct, frozen=True, kw_only=True):
    """The nodes of one class (their GPUs' model and count) in a cell: enough to place work and plan waves."""

    gpu: str  # e.g. "NVIDIA H100 80GB HBM3 x8"; "unknown" before a node's first sample
    nodes: int
    ready: int
    suspect: int
    lost: int
    cordoned: int
    schedulable: int  # Ready, not failing, not cordoned
    gpus_schedulable: int  # GPUs on schedulable nodes, less those the cell's jobs hold
    agents: dict[str, int]  # agent version -> nodes running it
    on_trial: int  # nodes running an agent release on trial


class CellSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A cell leader's view of its fleet, by node class; published when it changes, at most once a second."""

    cell: str
    epoch: int  # the cell leader's term: a summary from a deposed leader is refused
    at: float
    nodes: int
    classes: tuple[NodeClass, ...]


class FederationTerm(msgspec.Struct, frozen=True, tag="term", kw_only=True):
    """Written by a new federation leader into every cell's partition before it acts: the fence."""

    epoch: int
    leader: str


class RolloutWave(msgspec.Struct, frozen=True, tag="rollout-wave", kw_only=True):
    """Move this share of the cell's nodes (the cell picks which) to ``release``."""

    epoch: int
    release: str
    share: float


class PlaceJob(msgspec.Struct, frozen=True, tag="place-job", kw_only=True):
    """Run ``job`` in the cell on ``gpus`` GPUs of class ``gpu``."""

    epoch: int
    job: str
    gpu: str
    gpus: int


Intent = FederationTerm | RolloutWave | PlaceJob


class CellIntent(msgspec.Struct, frozen=True, kw_only=True):
    """One federation decision for one cell."""

    cell: str
    intent: Intent
