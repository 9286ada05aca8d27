"""The fleet simulator: thousands of simulated agents in one process, for load tests and capacity planning.

``FleetSimulator(settings, nodes, gpus, rate_hz, fault_rate, clock)`` publishes realistic ``NodeSample``s
(backend ``sim``) and ``NodeFault``s to a real broker; ``myolo-agent fleetsim`` runs it from the shell.
"""

from agent.fleetsim.simulator import FleetSimulator, FleetStats, SentFault

__all__ = ["FleetSimulator", "FleetStats", "SentFault"]
