"""A real local Apache Kafka (4.x, single-node KRaft) for development, tests and the demo.

from myolo.coordinator.localstack.broker import LocalBroker
broker = LocalBroker()          # state in ~/.local/state/myolo/local or $MYOLO_STATE_DIR
broker.start()                  # fetches jars once, formats storage, waits for metadata
print(broker.bootstrap)         # "127.0.0.1:PORT"
broker.stop(); broker.clean()
"""

from myolo.coordinator.localstack.broker.broker import BrokerStatus, LocalBroker
from myolo.coordinator.localstack.broker.errors import BrokerError
from myolo.coordinator.localstack.broker.probe import ClusterMetadata, answers_metadata, fetch_metadata
from myolo.coordinator.localstack.broker.state import default_state_dir

__all__ = [
    "BrokerError",
    "BrokerStatus",
    "ClusterMetadata",
    "LocalBroker",
    "answers_metadata",
    "default_state_dir",
    "fetch_metadata",
]
