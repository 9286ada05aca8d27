"""Cordons: which nodes get no new work, why, and who decided (the leader on faults and Lost nodes, or a person)."""
