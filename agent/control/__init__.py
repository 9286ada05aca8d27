"""The local control socket: fault injection and status for a running agent."""

from myolo.agent.control.client import ControlError, call
from myolo.agent.control.protocol import InjectRequest, Reply, StatusRequest
from myolo.agent.control.server import ControlServer

__all__ = ["ControlError", "ControlServer", "InjectRequest", "Reply", "StatusRequest", "call"]
