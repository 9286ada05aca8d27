"""The bus: our Kafka producer and consumer around the event contract."""

from myolo.events.bus.consumer import EventConsumer
from myolo.events.bus.producer import EventProducer
from myolo.events.deadletter import RecordInfo

__all__ = ["EventConsumer", "EventProducer", "RecordInfo"]
