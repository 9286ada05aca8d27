"""HTTP health endpoint and the checks it reports."""

from agent.healthz.checks import Check, HealthReport
from agent.healthz.server import HealthServer
from agent.healthz.throttle import ActiveAnswer, ActiveCheck

__all__ = ["ActiveAnswer", "ActiveCheck", "Check", "HealthReport", "HealthServer"]
