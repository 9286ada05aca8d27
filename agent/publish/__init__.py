"""Publishing events through the spool to Kafka, without loss and without blocking the sample loop."""

from myolo.agent.publish.publisher import Publisher, PublisherStatus

__all__ = ["Publisher", "PublisherStatus"]
