"""Tensor + sequence parallelism for the GPT, as DTensor ``parallelize_module`` plans.

Between blocks the activations are sharded along the sequence (Shard(1)); norms run sequence-parallel;
attention and MLP inputs are all-gathered, their first projections split by columns (heads / hidden) and
the last by rows with a reduce-scatter back onto the sequence. Attention itself runs on local tensors
(each rank its own heads) because SDPA on DTensors has no CPU sharding strategy.
"""

from __future__ import annotations

from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from myolo.kernels.model.gpt import GPT


def apply_tp(model: GPT, tp_mesh: DeviceMesh, loss_parallel: bool) -> None:
    """Shard ``model`` (a full model or a pipeline stage) over ``tp_mesh`` in place.

    With ``loss_parallel`` the logits stay vocab-sharded DTensors and the loss must run under
    ``torch.distributed.tensor.parallel.loss_parallel()``; otherwise they are gathered to full vocab.
    """
    top: dict = {}
    if model.tok_embeddings is not None:
        top["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))
    if model.norm is not None:
        top["norm"] = SequenceParallel()
    if model.output is not None:
        top["output"] = ColwiseParallel(
            input_layouts=Shard(1),
            output_layouts=Shard(-1) if loss_parallel else Replicate(),
            use_local_output=not loss_parallel,
        )
    if top:
        parallelize_module(model, tp_mesh, top)
    for block in model.layers.values():
        block.fuse_residual = False
        parallelize_module(
            block,
            tp_mesh,
            {
                "attention_norm": SequenceParallel(),
                "attention": PrepareModuleInput(
                    input_layouts=(Shard(1), None, None), desired_input_layouts=(Replicate(), None, None)
                ),
                "attention.wq": ColwiseParallel(),
                "attention.wk": ColwiseParallel(),
                "attention.wv": ColwiseParallel(),
                "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
                "ffn_norm": SequenceParallel(),
                "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
                "feed_forward.w1": ColwiseParallel(),
                "feed_forward.w3": ColwiseParallel(),
                "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            },
        )
