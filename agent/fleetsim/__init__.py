"""The fleet simulator: thousands of simulated agents in one process, for load tests and capacity planning.

``FleetSimulator(settings, nodes, gpus, rate_hz, fault_rate, clock)`` publishes realistic ``NodeSample``s
(backend ``sim``) and ``NodeFault``s to a real broker; ``myolo-agent fleetsim`` runs it from the shell.
It is imported from ``myolo.agent.fleetsim.simulator``: this package imports nothing, so mounting the command in the
agent's CLI does not load the simulator's numpy into the daemon.
"""
