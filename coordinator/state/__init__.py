"""Durable state: decisions written to compacted topics before acting, read back to the end at start."""

from coordinator.state.codec import BadStateRecord, decode_state, encode_state
from coordinator.state.records import TERM_KEY, CommandIntent, LeaderTerm
from coordinator.state.store import StateStore
from coordinator.state.tail import StateTail

__all__ = [
    "TERM_KEY",
    "BadStateRecord",
    "CommandIntent",
    "LeaderTerm",
    "StateStore",
    "StateTail",
    "decode_state",
    "encode_state",
]
