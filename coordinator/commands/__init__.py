"""Commands to agents: intents in the state topic, signed commands keyed by node, acks, retries."""
