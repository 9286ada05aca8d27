"""Durable state: decisions written to compacted topics before acting, read back to the end at start."""

from coordinator.state.codec import BadStateRecord, StateCodec
from coordinator.state.seal import ForgedStateRecord, StateKeys
from coordinator.state.store import StateStore
from coordinator.state.tail import StateTail

__all__ = ["BadStateRecord", "ForgedStateRecord", "StateCodec", "StateKeys", "StateStore", "StateTail"]
