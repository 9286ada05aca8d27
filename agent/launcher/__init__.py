"""``myolo-agent-launcher``: what the unit runs; it starts the agent from its current release and brings a
release that never commits itself back to the one before, from outside that release's code."""
