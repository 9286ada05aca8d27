"""The local control socket: fault injection and status for a running agent."""

from agent.control.client import ControlError, call
from agent.control.protocol import InjectRequest, Reply, StatusRequest
from agent.control.server import ControlServer

__all__ = ["ControlError", "ControlServer", "InjectRequest", "Reply", "StatusRequest", "call"]
