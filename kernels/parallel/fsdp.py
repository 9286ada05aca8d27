"""FSDP2 (``fully_shard``) over the data-parallel mesh dimension, block by block, then the root.

Per-block wrapping lets each block's parameters be gathered just before use and freed after; the root
call picks up embeddings, final norm and output. bf16 compute with fp32 gradient reduction on GPU.
"""

from __future__ import annotations

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from myolo.kernels.model.gpt import GPT


def apply_fsdp(model: GPT, dp_mesh: DeviceMesh, param_dtype: torch.dtype, pipelined: bool) -> None:
    """Shard ``model`` over ``dp_mesh`` in place.

    Under pipelining a stage runs several microbatches back to back, so parameters stay gathered after
    forward (no reshard) to avoid one all-gather per microbatch.
    """
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    reshard = not pipelined
    for block in model.layers.values():
        fully_shard(block, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard)
    fully_shard(model, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard)
