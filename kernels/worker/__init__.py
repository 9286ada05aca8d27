"""The worker's link to its node agent: environment parsing, progress/heartbeat push, control requests.

``WorkerEnv`` is torch-free; ``AgentLink`` and ``ControlRequest`` import torch (rank agreement), so they are
loaded on first use and tooling can import ``myolo.kernels.worker.env`` alone cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from myolo.kernels.lazy import lazy_attributes
from myolo.kernels.worker.env import WorkerEnv, WorkerEnvError

if TYPE_CHECKING:
    from myolo.kernels.worker.control import ControlRequest
    from myolo.kernels.worker.link import AgentLink

__all__ = ["AgentLink", "ControlRequest", "WorkerEnv", "WorkerEnvError"]

__getattr__ = lazy_attributes(
    __name__, {"AgentLink": "myolo.kernels.worker.link", "ControlRequest": "myolo.kernels.worker.control"}
)
