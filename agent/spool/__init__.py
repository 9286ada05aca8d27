"""The durable on-disk spool: every event waits here until Kafka has acknowledged it."""

from myolo.agent.spool.record import SpoolRecord
from myolo.agent.spool.spool import Spool, SpoolEntry
from myolo.agent.spool.stats import SpoolStats

__all__ = ["Spool", "SpoolEntry", "SpoolRecord", "SpoolStats"]
