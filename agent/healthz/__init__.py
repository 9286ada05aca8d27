"""HTTP health endpoint and the checks it reports."""

from agent.healthz.checks import Check, HealthReport
from agent.healthz.server import HealthServer

__all__ = ["Check", "HealthReport", "HealthServer"]
