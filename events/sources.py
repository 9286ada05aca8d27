"""CloudEvents ``source`` values that mean something: who may say what.

A node's agent publishes everything under :func:`agent_source`; the coordinator refuses a node event that
causes action (a fault, an ack, a training fault or completion) unless it comes from that node's agent and
carries that node's signature. Agent and coordinator share the rule here, never by importing each other.
"""

from __future__ import annotations

AGENT_PREFIX = "/myolo/agent/"


def agent_source(node_id: str) -> str:
    """The ``source`` of every event the agent of ``node_id`` publishes."""
    return f"{AGENT_PREFIX}{node_id}"
