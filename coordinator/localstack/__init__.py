"""The local stack beyond Kafka: coordinators and simulated-GPU agents as real, detached processes.

``myoloctl local up|down|status`` and the demo drive it; every process is recorded in the stack state
file (events.broker.state) with the marker that proves a pid is still ours.
"""

from coordinator.localstack.stack import ProcessView, StackError, start_members, stop_members, view_members

__all__ = ["ProcessView", "StackError", "start_members", "stop_members", "view_members"]
