"""The local stack: a real Kafka broker (``broker/``), coordinators and simulated-GPU agents as real, detached
processes, and the demo that drives them (``demo.py``). Only development, the demo and the tests use it.

``myoloctl local up|down|status`` and the demo drive it; every process is recorded in the stack state
file (myolo.coordinator.localstack.broker.state) with the marker that proves a pid is still ours.
"""
