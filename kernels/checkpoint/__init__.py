"""Sharded, resharding checkpoints (torch.distributed.checkpoint) and host shared-memory snapshots.

``Checkpointer`` is the one entry point for the training loop; ``read_marker`` lets tools (and the agent's
supervisor, via a subprocess) see which step a checkpoint directory can resume from.
"""

from myolo.kernels.checkpoint.checkpointer import Checkpointer
from myolo.kernels.checkpoint.marker import Marker, read_marker

__all__ = ["Checkpointer", "Marker", "read_marker"]
