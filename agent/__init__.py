"""The node agent (``myolo-agent``): GPU, NCCL and memory-leak telemetry published to Kafka.

One asyncio process per GPU node, run by systemd. It imports ``events`` and nothing else of ours, and never
torch: the bandwidth probe runs as a subprocess, so the daemon stays small and starts fast.
"""

__version__ = "4.0.0.dev0"
