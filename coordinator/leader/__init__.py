"""Leader election by Kafka group membership (the terms and epochs are the core's: coordinator/core)."""
