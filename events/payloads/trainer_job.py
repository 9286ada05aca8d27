"""The trainer's job description as it travels: in ``start_workers`` commands today, in ElasticJob manifests next.

Why a Struct of its own rather than ``myolo.kernels.train.config.JobConfig``: agents and the coordinator never import
torch or ``kernels``. This is the wire shape, with each field's type and bounds; the trainer's own checks (a
known model, a layout that divides the world size) run in the trainer's interpreter
(``python -m myolo.kernels.cli.check_job``). A test keeps the fields equal to ``JobConfig``'s.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from myolo.events.payloads.external import Sha256
from myolo.events.payloads.models import QuantScheme

Count = Annotated[int, msgspec.Meta(ge=1, le=1 << 20)]
Degree = Annotated[int, msgspec.Meta(ge=1, le=4096)]
Steps = Annotated[int, msgspec.Meta(ge=0, le=1 << 40)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
PathStr = Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
ModelArg = int | float | bool | Annotated[str, msgspec.Meta(max_length=256)]
Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
# cuBLAS's workspace setting for reproducible results (its docs: ":4096:8" or ":16:8"); the agent sets it in a
# deterministic job's workers' environment, the trainer sets it too when run alone
CUBLAS_WORKSPACE_CONFIG = ":4096:8"


class TrainerJob(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What to train and how; defaults are the trainer's. The world size is not here: it is the number of
    workers the job gets (nodes x workers per node), which the scheduler decides."""

    model: Name = "tiny"
    model_args: Annotated[dict[Name, ModelArg], msgspec.Meta(max_length=64)] = {}
    pp: Degree = 1
    dp: Annotated[int, msgspec.Meta(ge=0, le=1 << 20)] = 0  # 0: whatever the world size leaves
    tp: Degree = 1
    steps: Count = 20
    seed: Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)] = 0
    global_batch: Count = 8
    micro_batch: Annotated[int, msgspec.Meta(ge=0, le=1 << 20)] = 0
    seq_len: Annotated[int, msgspec.Meta(ge=1, le=1 << 22)] = 64
    lr: Annotated[float, msgspec.Meta(gt=0.0, le=10.0)] = 3e-4
    warmup_steps: Steps = 0
    min_lr_ratio: Fraction = 0.1
    weight_decay: Annotated[float, msgspec.Meta(ge=0.0, le=10.0)] = 0.1
    beta1: Fraction = 0.9
    beta2: Fraction = 0.95
    grad_clip: Annotated[float, msgspec.Meta(ge=0.0, le=1e6)] = 1.0
    schedule: Literal["1f1b", "interleaved1f1b"] = "1f1b"
    stages_per_rank: Annotated[int, msgspec.Meta(ge=1, le=64)] = 1
    sync_every: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] = 1
    compile: bool = False
    device: Literal["auto", "cpu", "cuda"] = "auto"
    data_path: PathStr | None = None
    data_dtype: Literal["uint16", "uint32"] = "uint16"
    # what data_path's bytes hash to (lowercase hex): rank 0 refuses to start on other bytes, and
    # `myoloctl preflight` checks the file on each node of the job against it
    data_sha256: Sha256 | None = None
    checkpoint_dir: PathStr | None = None
    checkpoint_every: Steps = 0
    snapshot_every: Steps = 0
    resume: bool = False
    init_from: PathStr | None = None  # safetensors weights to start from when there is no checkpoint to resume
    export_path: PathStr | None = None  # where rank 0 writes the final weights (safetensors) and <path>.json
    eval_data_path: PathStr | None = None  # a held-out token file the exported weights are evaluated on
    eval_batches: Count = 16
    ops_prefer: Annotated[
        dict[Name, Annotated[list[Name], msgspec.Meta(max_length=8)]], msgspec.Meta(max_length=32)
    ] = {}
    # quantize: init_from -> export_path on one worker (myolo.kernels.quantization), evaluated on eval_data_path
    task: Literal["train", "quantize"] = "train"
    init_from_sha256: Sha256 | None = None  # the digest init_from must have, checked before it is read
    quant_bits: Annotated[int, msgspec.Meta(ge=2, le=8)] = 4
    quant_scheme: QuantScheme = "gptq"
    quant_group_size: Annotated[int, msgspec.Meta(ge=0, le=4096)] | None = None
    calib_path: PathStr | None = None
    calib_sequences: Annotated[int, msgspec.Meta(ge=1, le=1 << 16)] = 128
    # the gradient-leakage defense of the data-parallel exchange: top-k with error feedback, defense_param of
    # the coordinates sent per step (docs/defense.md)
    defense: Literal["none", "gradient_compression"] = "none"
    defense_param: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] = 0.01
    defense_momentum: Annotated[float, msgspec.Meta(ge=0.0, lt=1.0)] = 0.0
    defense_exchange: Literal["gradient", "update"] = "gradient"  # what leaves: the gradient or AdamW's update
    defense_warmup_steps: Annotated[int, msgspec.Meta(ge=0, le=1 << 30)] = 0  # top-k share ramps to the param
    defense_vocab_param: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] | None = None  # None: defense_param
    watermark: PathStr | None = None  # a watermark key file on every node (mode 0600), never the key itself
    # NCCL's collective algorithm (NCCL_ALGO): auto lets NCCL choose per call; ring or tree pins it
    nccl_algo: Literal["auto", "ring", "tree"] = "auto"
    # deterministic kernels (torch.use_deterministic_algorithms, the cuBLAS workspace), seeded data order and
    # dropout: bit-identical runs; False lets the fastest kernels run (cudnn.benchmark). An ElasticJob sets it
    # as spec.runtime.deterministic
    deterministic: bool = True


class JobCheckResult(msgspec.Struct, omit_defaults=True):
    """The trainer's answer to "would you run this job at this world size?" (``myolo.kernels.cli.check_job``):
    ``field`` (``job.tp``, or ``world_size``) names what to change when ``ok`` is false."""

    ok: bool
    field: str | None = None
    reason: str | None = None
