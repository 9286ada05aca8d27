"""HTTP health endpoint and the checks it reports."""

from agent.endpoint.checks import Check, HealthReport
from agent.endpoint.server import HealthServer
from agent.endpoint.throttle import ActiveAnswer, ActiveCheck

__all__ = ["ActiveAnswer", "ActiveCheck", "Check", "HealthReport", "HealthServer"]
