"""The bus: our Kafka producer and consumer around the event contract."""

from events.bus.consumer import EventConsumer
from events.bus.producer import EventProducer
from events.deadletter import RecordInfo

__all__ = ["EventConsumer", "EventProducer", "RecordInfo"]
