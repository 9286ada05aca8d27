"""The trainer's job, defined once: sections of fields, each with its type, bounds and help.

The manifest's ``spec.trainer``, the ``start_workers`` command, the worker's job file and both command lines
(``myolo-train``, ``myoloctl train``) are derived from these Structs (``trainer_fields``). Agents and the
coordinator never import ``kernels``, so the definition lives in the contract. Each section's ``validate``
checks the rules among its own fields and ``TrainerJob.validate`` those between sections; the rules that need
the world size or the model registry (a layout dividing the world, a known preset) run in the trainer
(``myolo.kernels.train.config``). Every error names the dotted field, its flag, and the fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import msgspec

from myolo.common.errors import validation_problem
from myolo.events.payloads.external import Sha256
from myolo.events.payloads.models import QuantScheme
from myolo.events.payloads.trainer_errors import TrainerJobError
from myolo.events.payloads.trainer_flags import flag
from myolo.events.payloads.trainer_values import nest

Count = Annotated[int, msgspec.Meta(ge=1, le=1 << 20)]
Degree = Annotated[int, msgspec.Meta(ge=1, le=4096)]
Steps = Annotated[int, msgspec.Meta(ge=0, le=1 << 40)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
# a fused op's name in --ops, or "*" for every op (``--ops '*=reference'``)
OpName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^(\*|[A-Za-z0-9][A-Za-z0-9_.-]*)$")]
PathStr = Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
ModelArg = int | float | bool | Annotated[str, msgspec.Meta(max_length=256)]
Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Share = Annotated[float, msgspec.Meta(gt=0.0, le=1.0)]
# cuBLAS's workspace setting for reproducible results (its docs: ":4096:8" or ":16:8"); the agent sets it in a
# deterministic job's workers' environment, the trainer sets it too when run alone
CUBLAS_WORKSPACE_CONFIG = ":4096:8"
T = TypeVar("T")
J = TypeVar("J", bound="TrainerJob")


def Help(text: str) -> msgspec.Meta:
    """A field's help, shown by both command lines and kept in the JSON schema."""
    return msgspec.Meta(description=text)


class Section(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """One group of fields; ``key`` is its name in the job (``optimizer``)."""

    key: ClassVar[str] = ""

    def validate(self) -> None:
        """The rules among this section's fields (bounds are the types'); raises TrainerJobError."""

    def fail(self, field: str, reason: str) -> TrainerJobError:
        return TrainerJobError.at(f"{self.key}.{field}", reason)


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


class ModelSection(Section):
    key: ClassVar[str] = "model"
    name: Annotated[Name, Help("Model preset: tiny, small, 1b.")] = "tiny"
    args: Annotated[
        dict[Name, ModelArg], msgspec.Meta(max_length=64), Help("Override a model knob, name=value (repeatable).")
    ] = {}


class ParallelismSection(Section):
    key: ClassVar[str] = "parallelism"
    pp: Annotated[Degree, Help("Pipeline-parallel degree.")] = 1
    dp: Annotated[int, msgspec.Meta(ge=0, le=1 << 20), Help("Data-parallel degree (0: the world size / (pp*tp)).")] = 0
    tp: Annotated[Degree, Help("Tensor-parallel degree.")] = 1
    schedule: Annotated[Literal["1f1b", "interleaved1f1b"], Help("Pipeline schedule: 1f1b, interleaved1f1b.")] = "1f1b"
    stages_per_rank: Annotated[int, msgspec.Meta(ge=1, le=64), Help("Pipeline stages per rank.")] = 1
    sync_every: Annotated[
        int, msgspec.Meta(ge=1, le=1 << 20), Help("1: synchronous (FSDP); H>1: local SGD averaging every H steps.")
    ] = 1

    def validate(self) -> None:
        if self.pp == 1:
            return
        if self.schedule == "1f1b" and self.stages_per_rank != 1:
            raise self.fail("stages_per_rank", "schedule 1f1b runs one stage per rank: set it to 1")
        if self.schedule == "interleaved1f1b" and self.stages_per_rank < 2:
            raise self.fail("stages_per_rank", "schedule interleaved1f1b needs 2 or more stages per rank")


class DataSection(Section):
    key: ClassVar[str] = "data"
    path: Annotated[PathStr | None, Help("Token file (flat uint16/uint32 ids); none: synthetic data.")] = None
    dtype: Annotated[Literal["uint16", "uint32"], Help("The token file's id type: uint16 or uint32.")] = "uint16"
    sha256: Annotated[
        Sha256 | None,
        Help(
            "SHA-256 (lowercase hex) the token file must have: rank 0 refuses other bytes, and "
            "`myoloctl preflight` checks the file on each node against it."
        ),
    ] = None
    seq_len: Annotated[int, msgspec.Meta(ge=1, le=1 << 22), Help("Tokens per sequence.")] = 64
    global_batch: Annotated[Count, Help("Sequences per optimizer step, over all replicas.")] = 8
    micro_batch: Annotated[
        int, msgspec.Meta(ge=0, le=1 << 20), Help("Sequences per microbatch per replica (0: one per pipeline stage).")
    ] = 0
    eval_path: Annotated[
        PathStr | None, Help("Held-out token file (like --data) the exported weights are evaluated on.")
    ] = None
    eval_batches: Annotated[Count, Help("Held-out batches of --global-batch rows, read in file order.")] = 16

    def validate(self) -> None:
        for field in ("path", "eval_path"):
            if _blank(getattr(self, field)):
                raise self.fail(field, "must be a file path, not blank")
        if self.sha256 is not None and self.path is None:
            raise self.fail("sha256", "is the digest of the token file, and synthetic data has none: set --data")


class OptimizerSection(Section):
    key: ClassVar[str] = "optimizer"
    steps: Annotated[Count, Help("Optimizer steps.")] = 20
    lr: Annotated[float, msgspec.Meta(gt=0.0, le=10.0), Help("Peak learning rate.")] = 3e-4
    warmup_steps: Annotated[Steps, Help("Linear warm-up steps to the peak learning rate.")] = 0
    min_lr_ratio: Annotated[Fraction, Help("The cosine decay's floor, as a share of the peak learning rate.")] = 0.1
    weight_decay: Annotated[float, msgspec.Meta(ge=0.0, le=10.0), Help("AdamW's weight decay.")] = 0.1
    beta1: Annotated[Fraction, Help("AdamW's beta1.")] = 0.9
    beta2: Annotated[Fraction, Help("AdamW's beta2.")] = 0.95
    grad_clip: Annotated[float, msgspec.Meta(ge=0.0, le=1e6), Help("Global-norm gradient clip (0: off).")] = 1.0

    def validate(self) -> None:
        if self.warmup_steps > self.steps:
            raise self.fail(
                "warmup_steps", f"{self.warmup_steps} exceeds the {self.steps} steps: lower it to at most {self.steps}"
            )


class CheckpointSection(Section):
    key: ClassVar[str] = "checkpoint"
    dir: Annotated[PathStr | None, Help("Directory for sharded checkpoints (every node's, for elastic resume).")] = None
    every: Annotated[Steps, Help("Save every N steps (0: off).")] = 0
    snapshot_every: Annotated[Steps, Help("Host-memory snapshot every N steps (0: off).")] = 0
    resume: Annotated[bool, Help("Resume from the newest checkpoint in --checkpoint-dir.")] = False
    init_from: Annotated[
        PathStr | None, Help("Safetensors weights (an earlier export) to start from when not resuming a checkpoint.")
    ] = None
    init_from_sha256: Annotated[Sha256 | None, Help("SHA-256 --init-from must have, checked before it is read.")] = None
    export_path: Annotated[
        PathStr | None,
        Help(
            "After the last step, rank 0 writes the final weights here (safetensors) and a manifest <path>.json "
            "(checksums, eval); needs --checkpoint-dir."
        ),
    ] = None

    def validate(self) -> None:
        for field in ("dir", "init_from", "export_path"):
            if _blank(getattr(self, field)):
                raise self.fail(field, "must be a path, not blank")
        if self.resume and not self.dir:
            raise self.fail("dir", "--resume needs the checkpoint directory to resume from: set it")
        if self.init_from_sha256 is not None and self.init_from is None:
            raise self.fail("init_from_sha256", "is the digest of --init-from's file: set --init-from")
        if self.export_path is not None and self.export_path.endswith(("/", os.sep)):
            raise self.fail(
                "export_path", f"{self.export_path!r} names a directory; name the weights file, e.g. model.safetensors"
            )


class DefenseSection(Section):
    """The gradient-leakage defense of the data-parallel exchange (docs/defense.md)."""

    key: ClassVar[str] = "defense"
    kind: Annotated[
        Literal["none", "gradient_compression"],
        Help(
            "Gradient-leakage defense of the data-parallel exchange: none or gradient_compression (top-k with "
            "error feedback; the vocabulary's rows by a data-independent draw). docs/defense.md."
        ),
    ] = "none"
    param: Annotated[Share, Help("gradient_compression: the share of coordinates each replica sends per step.")] = 0.01
    momentum: Annotated[
        float, msgspec.Meta(ge=0.0, lt=1.0), Help("Momentum correction of the compressed exchange (0: error feedback).")
    ] = 0.0
    exchange: Annotated[
        Literal["gradient", "update"],
        Help(
            "What the defended exchange sends: gradient, or update (each replica steps AdamW on its own gradient "
            "and the change is compressed and averaged; converges closer to dense)."
        ),
    ] = "gradient"
    warmup_steps: Annotated[
        int,
        msgspec.Meta(ge=0, le=1 << 30),
        Help("Steps over which the share of coordinates sent ramps from all of them down to --param (0: none)."),
    ] = 0
    vocab_param: Annotated[
        Share | None, Help("Share of the vocabulary's rows (embedding and head) drawn each step (none: --param).")
    ] = None


class WatermarkSection(Section):
    key: ClassVar[str] = "watermark"
    key_file: Annotated[
        PathStr | None,
        Help("Watermark key file on every node (mode 0600; never the key itself): its mark is embedded in training."),
    ] = None

    def validate(self) -> None:
        if _blank(self.key_file):
            raise self.fail("key_file", "must be the key file's path, not blank")


class QuantizationSection(Section):
    """What ``runtime.task: quantize`` does: --init-from quantized into --export-path on one worker."""

    key: ClassVar[str] = "quantization"
    bits: Annotated[int, msgspec.Meta(ge=2, le=8), Help("Bits per weight: 4 or 8.")] = 4
    scheme: Annotated[QuantScheme, Help("Quantization scheme (gptq learns from calibration inputs).")] = "gptq"
    group_size: Annotated[
        Annotated[int, msgspec.Meta(ge=0, le=4096)] | None,
        Help("Weights per scale (0: whole rows; none: 128 at 4 bits, whole rows at 8)."),
    ] = None
    calib_path: Annotated[PathStr | None, Help("Calibration token file (like --data), for gptq.")] = None
    calib_sequences: Annotated[int, msgspec.Meta(ge=1, le=1 << 16), Help("Calibration sequences read.")] = 128

    def validate(self) -> None:
        if _blank(self.calib_path):
            raise self.fail("calib_path", "must be a file path, not blank")


class RuntimeSection(Section):
    key: ClassVar[str] = "runtime"
    task: Annotated[
        Literal["train", "quantize"], Help("What the job does: train, or quantize --init-from into --export-path.")
    ] = "train"
    seed: Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1), Help("Seed for init and data.")] = 0
    compile: Annotated[bool, Help("torch.compile the blocks.")] = False
    device: Annotated[Literal["auto", "cpu", "cuda"], Help("auto, cpu or cuda.")] = "auto"
    nccl_algo: Annotated[
        Literal["auto", "ring", "tree"],
        Help("NCCL's algorithm on GPUs: auto (NCCL chooses per call), ring or tree (NCCL_ALGO)."),
    ] = "auto"
    deterministic: Annotated[
        bool,
        Help(
            "Deterministic kernels, seeded data order and dropout: bit-identical runs (the default); --fast lets "
            "the fastest kernels run (cudnn.benchmark)."
        ),
    ] = True
    ops_prefer: Annotated[
        dict[OpName, Annotated[list[Name], msgspec.Meta(max_length=8)]],
        msgspec.Meta(max_length=32),
        Help("Backend order for a fused op (* for every op): op=backend[,backend] (repeatable)."),
    ] = {}


class TrainerJob(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What to train and how; defaults are the trainer's. The world size is not here: it is the number of
    workers the job gets (nodes x workers per node), which the scheduler decides."""

    model: ModelSection = ModelSection()
    parallelism: ParallelismSection = ParallelismSection()
    data: DataSection = DataSection()
    optimizer: OptimizerSection = OptimizerSection()
    checkpoint: CheckpointSection = CheckpointSection()
    defense: DefenseSection = DefenseSection()
    watermark: WatermarkSection = WatermarkSection()
    quantization: QuantizationSection = QuantizationSection()
    runtime: RuntimeSection = RuntimeSection()

    @classmethod
    def from_fields(cls: type[J], fields: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> J:
        """A job from values by field path (``{"optimizer.lr": 1e-3}``) laid over ``base``'s sections;
        a wrong value raises TrainerJobError naming its field."""
        return decode(nest(fields, base), cls)

    def sections(self) -> list[Section]:
        return [v for v in (getattr(self, f) for f in self.__struct_fields__) if isinstance(v, Section)]

    def validate(self) -> None:
        """The bounds of every field (also for a job built in Python), each section's rules, then those between
        sections; raises TrainerJobError naming the first field at fault."""
        decode(msgspec.to_builtins(self), type(self))
        for section in self.sections():
            section.validate()
        self._validate_across()

    def _validate_across(self) -> None:
        par, data, ckpt, run = self.parallelism, self.data, self.checkpoint, self.runtime
        if run.compile and par.tp > 1:
            # Found on torch 2.13 (CPU, gloo): a compiled block under the TP plan gets a plain-tensor gradient
            # where its compiled backward expects a DTensor. Eager TP and compiled pp/dp are fine.
            raise TrainerJobError.at(
                "runtime.compile",
                "with tp > 1 is not supported yet (compiled tensor-parallel blocks fail in "
                "backward on this torch): drop --compile, or use --tp 1",
            )
        if self.defense.kind != "none" and par.sync_every > 1:
            raise TrainerJobError.at(
                "defense.kind",
                "replaces the per-step gradient exchange; local SGD (--sync-every > 1) has none: use one of them",
            )
        if run.task == "quantize":  # before the export's rules: a quantize job lacking one is told what it needs
            self._validate_quantize()
        if ckpt.export_path is not None:
            if not ckpt.dir and run.task == "train":
                raise TrainerJobError.at(
                    "checkpoint.dir",
                    "--export-path needs it: the export is consolidated from the final sharded "
                    "checkpoint, which is written there",
                )
            target = os.path.normpath(ckpt.export_path)
            for field in ("path", "eval_path"):
                other = getattr(data, field)
                if other and os.path.normpath(other) == target:
                    raise TrainerJobError.at(
                        "checkpoint.export_path",
                        f"{ckpt.export_path!r} is also {flag('data.' + field)}: the "
                        "export would overwrite the data; choose another file",
                    )
        if data.eval_path is not None and ckpt.export_path is None:
            raise TrainerJobError.at("data.eval_path", "needs --export-path: the held-out set evaluates the export")

    def _validate_quantize(self) -> None:
        for field, why in (("init_from", "the model to quantize"), ("export_path", "where the quantized model goes")):
            if getattr(self.checkpoint, field) is None:
                raise TrainerJobError.at(f"checkpoint.{field}", f"task quantize needs it: {why}")
        quant = self.quantization
        if quant.bits not in (4, 8):
            raise TrainerJobError.at("quantization.bits", f"must be 4 or 8, got {quant.bits}")
        if quant.scheme == "gptq" and quant.calib_path is None:
            raise TrainerJobError.at(
                "quantization.calib_path", "scheme gptq needs it: it learns from calibration inputs"
            )


def decode(data: Any, kind: type[T]) -> T:
    """``data`` (a mapping of sections) as ``kind``; a wrong value is a TrainerJobError naming its field."""
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        problem = validation_problem(exc)
        field = problem.field.lstrip(".").split("[")[0] or None
        if field is None:
            raise TrainerJobError(f"job: {problem.message}") from None
        if problem.kind == "unknown":
            raise TrainerJobError(f"{field}: unknown field; {_where(field)}", field) from None
        raise TrainerJobError.at(field, problem.message) from None


def _where(field: str) -> str:
    """Where an unknown field may belong: the section holding a field of that name, or the sections."""
    name = field.rpartition(".")[2]
    homes = [f"{s.key}.{name}" for s in TrainerJob().sections() if name in s.__struct_fields__]
    if homes:
        return f"did you mean {' or '.join(homes)}?"
    return f"a job's sections are {', '.join(TrainerJob.__struct_fields__)}"


class JobCheckResult(msgspec.Struct, omit_defaults=True):
    """The trainer's answer to "would you run this job at this world size?" (``myolo.kernels.cli.check_job``):
    ``field`` (``job.parallelism.tp``, or ``world_size``) names what to change when ``ok`` is false."""

    ok: bool
    field: str | None = None
    reason: str | None = None
