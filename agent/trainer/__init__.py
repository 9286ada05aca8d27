"""The trainer supervisor of the agent: it starts, watches and stops the node's training workers as processes
(never importing torch), reads their progress over ZeroMQ and their logs from disk."""
