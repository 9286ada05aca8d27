"""Leader election by Kafka group membership, and the epoch of each term."""

from coordinator.leader.election import LeaderElector
from coordinator.leader.term import next_epoch

__all__ = ["LeaderElector", "next_epoch"]
