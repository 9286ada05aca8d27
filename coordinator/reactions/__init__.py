"""Reactions of the leader to what the fleet view sees (now: cordons; later: rescheduling)."""

from coordinator.reactions.cordon import AUTO_FAULT, AUTO_LOST, CordonPolicy, operator_by, record
from coordinator.reactions.reactor import Reactor

__all__ = ["AUTO_FAULT", "AUTO_LOST", "CordonPolicy", "Reactor", "operator_by", "record"]
