"""The fleet view: what the coordinator knows of every node, built from the agents' events."""
