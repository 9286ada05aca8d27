"""Durable state: decisions written to compacted topics before acting, read back to the end at start."""

from myolo.coordinator.state.codec import BadStateRecord, StateCodec
from myolo.coordinator.state.seal import ForgedStateRecord, StateKeys
from myolo.coordinator.state.store import StateStore
from myolo.coordinator.state.tail import StateTail

__all__ = ["BadStateRecord", "ForgedStateRecord", "StateCodec", "StateKeys", "StateStore", "StateTail"]
