"""The event contract and bus of Myolotrain: CloudEvents over Kafka, typed payloads, topics, producer and
consumer with dead-lettering, signatures, trace propagation, plus the shared runtime pieces (clock, config,
logging, telemetry) and the local broker. Imports nothing else of ours."""
