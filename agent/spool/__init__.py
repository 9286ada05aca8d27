"""The durable on-disk spool: every event waits here until Kafka has acknowledged it."""

from agent.spool.record import SpoolRecord
from agent.spool.spool import Spool, SpoolEntry
from agent.spool.stats import SpoolStats

__all__ = ["Spool", "SpoolEntry", "SpoolRecord", "SpoolStats"]
