"""Rolling upgrades of the agent or the trainer across the fleet, in waves with health gates and rollback."""
