"""NCCL telemetry: parse NCCL_DEBUG=INFO logs of the local trainers, and run the bus-bandwidth probe.

``parse`` turns a line into a record, ``tracker`` turns records into reports and faults, ``follow`` reads
a growing log file (or a pipe), ``watch`` wires them to a publisher, ``probe`` runs the torch all-reduce
sweep (``myolo.kernels.probe.allreduce``) as a subprocess: the agent itself never imports torch.
"""
