"""The event contract and bus of Myolotrain: CloudEvents over Kafka, typed payloads, topics, producer and
consumer with dead-lettering, signatures, trace propagation, the ACLs of each role, plus the shared runtime
pieces (clock, config, logging, telemetry). Imports nothing else of ours; the local broker of the stack and the
tests lives in coordinator/localstack/broker."""
