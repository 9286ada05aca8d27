"""HTTP health endpoint and the checks it reports."""

from myolo.agent.endpoint.checks import Check, HealthReport
from myolo.agent.endpoint.server import HealthServer
from myolo.agent.endpoint.throttle import ActiveAnswer, ActiveCheck

__all__ = ["ActiveAnswer", "ActiveCheck", "Check", "HealthReport", "HealthServer"]
