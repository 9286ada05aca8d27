"""The job description and its validation: every bad combination fails before any process starts.

A job fixes the *global* batch; the data-parallel degree only changes how many microbatches each
replica accumulates, so the optimisation is identical at any dp (what makes elastic resizing safe).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from myolo.events.payloads.models import QuantScheme
from myolo.kernels.model.config import PRESETS, ModelConfig, preset
from myolo.kernels.parallel.layout import SCHEDULES, Layout

_SHA256 = re.compile(r"[0-9a-f]{64}")
TASKS = ("train", "quantize")
DEFENSES = ("none", "gradient_compression")
DEFENSE_EXCHANGES = ("gradient", "update")
QUANT_SCHEMES: tuple[str, ...] = get_args(QuantScheme)


NCCL_ALGOS = ("auto", "ring", "tree")


class JobConfigError(ValueError):
    """A training job's options are invalid; the message names the flag(s) and says what to change.

    Not ``myolo.events.errors.ConfigError``: that one is a daemon's configuration key (one dotted key and its
    environment variable, message "config key K: reason"), whereas most job errors are about a combination
    of flags against the world size (pp x tp vs --nproc, batch vs dp), which no single key names.

    ``field`` is the ``JobConfig`` field at fault; for a combination, the one whose change the message puts
    first, among the job's own fields: a layout that does not divide the world size blames the degree that
    does not fit (``tp`` when it alone does not divide the world, else ``pp``), since the world size is the
    scheduler's choice, not the job's. It lets a caller with its own vocabulary (the agent's ``job.<field>``)
    point at the input; None where no field is at fault (a job file that does not exist or does not parse).
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _flag(name: str) -> str:
    """A field's command-line flag (``eval_data_path`` is ``--eval-data``, like ``data_path``'s ``--data``)."""
    return {"data_path": "data", "eval_data_path": "eval-data", "defense_param": "param"}.get(
        name, name.replace("_", "-")
    )


def reject_unknown(options: Mapping[str, Any], known: Collection[str]) -> None:
    """JobConfigError naming the first unknown option (by name) and listing the valid ones."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise JobConfigError(f"unknown job option(s) {unknown}; valid options: {sorted(known)}", unknown[0])


@dataclass
class JobConfig:
    model: str = "tiny"
    model_args: dict[str, Any] = field(default_factory=dict)  # overrides of any ModelConfig knob
    nproc: int = 1
    pp: int = 1
    dp: int = 0  # 0: whatever nproc / (pp * tp) leaves
    tp: int = 1
    steps: int = 20
    seed: int = 0
    global_batch: int = 8  # sequences per optimizer step, over all replicas
    micro_batch: int = 0  # sequences per microbatch per replica; 0: one microbatch per pipeline stage
    seq_len: int = 64
    lr: float = 3e-4
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0  # 0 disables clipping
    schedule: str = "1f1b"
    stages_per_rank: int = 1
    sync_every: int = 1  # 1: synchronous (FSDP); H > 1: local SGD, parameters averaged every H steps
    compile: bool = False
    device: str = "auto"  # auto | cpu | cuda
    data_path: str | None = None
    data_dtype: str = "uint16"
    data_sha256: str | None = None  # SHA-256 (lowercase hex) data_path must have: rank 0 checks it at start
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    snapshot_every: int = 0
    resume: bool = False
    init_from: str | None = None  # safetensors full weights to start from when there is no checkpoint to resume
    export_path: str | None = None  # rank 0 writes the final weights here (safetensors) and <export_path>.json
    eval_data_path: str | None = None  # held-out token file (data_path's format) the export is evaluated on
    eval_batches: int = 16  # batches of global_batch rows read from eval_data_path, in file order
    ops_prefer: dict[str, list[str]] = field(default_factory=dict)
    # what the job does: train, or quantize init_from into export_path (myolo.kernels.quantization; one worker)
    task: str = "train"
    init_from_sha256: str | None = None  # SHA-256 init_from must have: checked before it is read
    quant_bits: int = 4
    quant_scheme: str = "gptq"
    quant_group_size: int | None = None  # None: 128 at 4 bits, whole rows at 8
    calib_path: str | None = None  # calibration token file (data_path's format)
    calib_sequences: int = 128
    # the gradient-leakage defense of the data-parallel exchange (myolo.kernels.defense): none | gradient_compression
    defense: str = "none"
    defense_param: float = 0.01  # gradient_compression: the share of coordinates each replica sends per step
    defense_momentum: float = 0.0  # its momentum correction (0: plain error feedback; AdamW keeps its own)
    defense_exchange: str = "gradient"  # what the replicas exchange: the gradient, or the optimizer's update
    defense_warmup_steps: int = 0  # steps over which the top-k share ramps from all coordinates to defense_param
    defense_vocab_param: float | None = None  # share of the vocabulary's rows drawn per step (None: defense_param)
    watermark: str | None = None  # a watermark key file (0600): the mark is embedded while training
    nccl_algo: str = "auto"  # NCCL_ALGO for the job's communicators: auto (NCCL's choice), ring or tree
    deterministic: bool = True  # bit-identical runs (myolo.kernels.train.determinism); False: the fastest kernels
    job_id: str = "standalone"

    # ---- derived -------------------------------------------------------------------------------
    def model_config(self) -> ModelConfig:
        at_fault = "model_args" if isinstance(self.model, str) and self.model in PRESETS else "model"
        try:
            cfg = preset(self.model, **self.model_args)
        except (ValueError, TypeError, ArithmeticError) as exc:  # ArithmeticError: sizes too large to compute
            raise JobConfigError(f"model: {exc}", at_fault) from exc
        return cfg

    def layout(self) -> Layout:
        dp = self.dp or max(1, self.nproc // max(1, self.pp * self.tp))
        return Layout(pp=self.pp, dp=dp, tp=self.tp)

    def rows_per_replica(self) -> int:
        return self.global_batch // self.layout().dp

    def micro_rows(self) -> int:
        if self.micro_batch:
            return self.micro_batch
        per = self.rows_per_replica()
        want = self.pp * self.stages_per_rank if self.pp > 1 else 1
        return max(1, per // want)

    def n_microbatches(self) -> int:
        """Microbatches each replica runs per step: pipeline microbatches or accumulation steps."""
        return self.rows_per_replica() // self.micro_rows()

    # ---- validation ----------------------------------------------------------------------------
    def validate(self, world_size: int | None = None) -> JobConfig:
        """Raise JobConfigError for the first problem found; returns self for chaining."""
        world = world_size if world_size is not None else self.nproc
        for name in (
            "nproc",
            "pp",
            "tp",
            "steps",
            "global_batch",
            "seq_len",
            "stages_per_rank",
            "sync_every",
            "eval_batches",
        ):
            if getattr(self, name) < 1:
                raise JobConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}", name)
        for name in ("dp", "micro_batch", "warmup_steps", "checkpoint_every", "snapshot_every"):
            if getattr(self, name) < 0:
                raise JobConfigError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}", name)
        if self.lr <= 0:
            raise JobConfigError(f"--lr must be > 0, got {self.lr}", "lr")
        if self.nccl_algo not in NCCL_ALGOS:
            raise JobConfigError(
                f"--nccl-algo must be one of {', '.join(NCCL_ALGOS)}, got {self.nccl_algo!r}", "nccl_algo"
            )
        if self.pp * self.tp > world or world % (self.pp * self.tp):
            raise JobConfigError(
                f"layout pp={self.pp} x tp={self.tp} does not divide the world size {world}: "
                f"choose --nproc as a multiple of pp*tp={self.pp * self.tp} or change --pp/--tp",
                "tp" if world % self.tp else "pp",
            )
        lay = self.layout()
        if lay.world != world:
            raise JobConfigError(
                f"layout {lay} needs {lay.world} processes but the world size is {world}: "
                f"set --dp {world // (self.pp * self.tp)} or --nproc {lay.world}",
                "dp",
            )
        cfg = self.model_config()
        if cfg.n_heads % self.tp or cfg.kv_heads % self.tp:
            raise JobConfigError(
                f"model {self.model!r} has {cfg.n_heads} heads ({cfg.kv_heads} KV heads), not divisible "
                f"by tp={self.tp}: choose --tp dividing {cfg.kv_heads} or set model_args.n_heads",
                "tp",
            )
        if cfg.vocab_size % self.tp or cfg.hidden % self.tp:
            raise JobConfigError(
                f"vocab_size {cfg.vocab_size} and MLP hidden {cfg.hidden} must be divisible by tp={self.tp}: "
                "pad model_args.vocab_size to a multiple of tp or change --tp",
                "model_args",
            )
        if self.seq_len % self.tp:
            raise JobConfigError(
                f"--seq-len {self.seq_len} must be divisible by tp={self.tp} (sequence parallelism shards it)",
                "seq_len",
            )
        if self.seq_len > cfg.max_seq_len:
            raise JobConfigError(f"--seq-len {self.seq_len} exceeds model max_seq_len {cfg.max_seq_len}", "seq_len")
        if self.global_batch % lay.dp:
            raise JobConfigError(
                f"--global-batch {self.global_batch} is not divisible by dp={lay.dp}: use a multiple of {lay.dp}",
                "global_batch",
            )
        per = self.rows_per_replica()
        if per % self.micro_rows():
            raise JobConfigError(
                f"per-replica batch {per} (global {self.global_batch} / dp {lay.dp}) is not divisible by "
                f"--micro-batch {self.micro_rows()}: choose a micro batch dividing {per}",
                "micro_batch",
            )
        if self.schedule not in SCHEDULES:
            raise JobConfigError(f"--schedule {self.schedule!r} is unknown; choose one of {SCHEDULES}", "schedule")
        if self.pp > 1:
            n_stages = self.pp * self.stages_per_rank
            if self.schedule == "1f1b" and self.stages_per_rank != 1:
                raise JobConfigError(
                    "--schedule 1f1b runs one stage per rank: set --stages-per-rank 1", "stages_per_rank"
                )
            if self.schedule == "interleaved1f1b" and self.stages_per_rank < 2:
                raise JobConfigError("--schedule interleaved1f1b needs --stages-per-rank >= 2", "stages_per_rank")
            if n_stages > cfg.n_layers:
                raise JobConfigError(
                    f"{n_stages} pipeline stages exceed the model's {cfg.n_layers} layers: lower --pp", "pp"
                )
            n_mb = self.n_microbatches()
            if n_mb < self.pp:
                raise JobConfigError(
                    f"{n_mb} microbatches per step is fewer than the {self.pp} pipeline stages (the "
                    f"pipeline would hang): lower --micro-batch or raise --global-batch to at least "
                    f"{self.pp * lay.dp * self.micro_rows()}",
                    "micro_batch",
                )
            if self.schedule == "interleaved1f1b" and n_mb % self.pp:
                raise JobConfigError(
                    f"interleaved 1F1B needs microbatches ({n_mb}) to be a multiple of pp={self.pp}", "micro_batch"
                )
        if self.compile and self.tp > 1:
            # Found on torch 2.13 (CPU, gloo): a compiled block under the TP plan gets a plain-tensor
            # gradient where its compiled backward expects a DTensor ("no attribute '_local_tensor'"),
            # even as one full graph. Eager TP and compiled pp/dp are fine.
            raise JobConfigError(
                "--compile with tp > 1 is not supported yet (compiled tensor-parallel blocks fail in "
                "backward on this torch): drop --compile, or use --tp 1",
                "compile",
            )
        if self.sync_every > 1 and lay.dp == 1:
            raise JobConfigError("--sync-every > 1 (local SGD) needs dp > 1 replicas to average", "sync_every")
        if self.resume and not self.checkpoint_dir:
            raise JobConfigError("--resume needs --checkpoint-dir", "checkpoint_dir")
        if self.device not in ("auto", "cpu", "cuda"):
            raise JobConfigError(f"--device must be auto, cpu or cuda, got {self.device!r}", "device")
        self._validate_data_sha256()
        self._validate_task(world)
        self._validate_export()
        self._validate_security()
        return self

    def _validate_security(self) -> None:
        if self.defense not in DEFENSES:
            raise JobConfigError(f"--defense must be one of {list(DEFENSES)}, got {self.defense!r}", "defense")
        if self.defense != "none":
            if not 0 < self.defense_param <= 1:
                raise JobConfigError(
                    f"--param (the share of gradient coordinates sent) must be in (0, 1], got {self.defense_param}",
                    "defense_param",
                )
            if not 0 <= self.defense_momentum < 1:
                raise JobConfigError(
                    f"--defense-momentum must be in [0, 1), got {self.defense_momentum}", "defense_momentum"
                )
            if self.defense_exchange not in DEFENSE_EXCHANGES:
                raise JobConfigError(
                    f"--defense-exchange must be one of {list(DEFENSE_EXCHANGES)}, got {self.defense_exchange!r}",
                    "defense_exchange",
                )
            if not isinstance(self.defense_warmup_steps, int) or self.defense_warmup_steps < 0:
                raise JobConfigError(
                    f"--defense-warmup-steps must be a whole number >= 0, got {self.defense_warmup_steps!r}",
                    "defense_warmup_steps",
                )
            vocab = self.defense_vocab_param
            if vocab is not None and (
                isinstance(vocab, bool) or not isinstance(vocab, int | float) or not 0 < vocab <= 1
            ):
                raise JobConfigError(
                    f"--defense-vocab-param (the share of the vocabulary's rows drawn per step) must be in (0, 1], "
                    f"got {vocab!r}",
                    "defense_vocab_param",
                )
            if self.sync_every > 1:
                raise JobConfigError(
                    "--defense replaces the per-step gradient exchange; local SGD (--sync-every > 1) has none: "
                    "use one of them",
                    "defense",
                )
        if self.watermark is not None and (not isinstance(self.watermark, str) or not self.watermark):
            raise JobConfigError(f"--watermark must be a key file path, got {self.watermark!r}", "watermark")

    def _validate_task(self, world: int) -> None:
        if self.task not in TASKS:
            raise JobConfigError(f"task must be one of {list(TASKS)}, got {self.task!r}", "task")
        if self.init_from_sha256 is not None:
            if not (isinstance(self.init_from_sha256, str) and _SHA256.fullmatch(self.init_from_sha256)):
                raise JobConfigError(
                    f"init_from_sha256 must be a SHA-256 in lowercase hex (64 digits), got {self.init_from_sha256!r}",
                    "init_from_sha256",
                )
            if self.init_from is None:
                raise JobConfigError("init_from_sha256 needs --init-from: it is that file's digest", "init_from_sha256")
        if self.calib_path is not None and not (isinstance(self.calib_path, str) and self.calib_path.strip()):
            raise JobConfigError(f"calib_path must be a file path, got {self.calib_path!r}", "calib_path")
        if self.task != "quantize":
            return
        if world != 1:
            raise JobConfigError(
                f"task quantize runs on one worker, not {world}: give it one replica of one GPU", "task"
            )
        for name, why in (("init_from", "the model to quantize"), ("export_path", "where the quantized model goes")):
            if getattr(self, name) is None:
                raise JobConfigError(f"task quantize needs --{_flag(name)}: {why}", name)
        if self.quant_bits not in (4, 8):
            raise JobConfigError(f"quant_bits must be 4 or 8, got {self.quant_bits}", "quant_bits")
        if self.quant_scheme not in QUANT_SCHEMES:
            raise JobConfigError(
                f"quant_scheme must be one of {list(QUANT_SCHEMES)}, got {self.quant_scheme!r}", "quant_scheme"
            )
        if self.quant_scheme == "gptq" and self.calib_path is None:
            raise JobConfigError("quant_scheme gptq needs calib_path: it learns from calibration inputs", "calib_path")
        if self.quant_group_size is not None and not 0 <= self.quant_group_size <= 4096:
            raise JobConfigError(f"quant_group_size must be 0..4096, got {self.quant_group_size}", "quant_group_size")
        if self.calib_sequences < 1:
            raise JobConfigError(f"calib_sequences must be >= 1, got {self.calib_sequences}", "calib_sequences")

    def _validate_data_sha256(self) -> None:
        """A digest must be one (64 lowercase hex digits) and have a file to be the digest of; whether the
        file matches is checked on rank 0 at start (``myolo.kernels.train.data_check``), where the path resolves."""
        if self.data_sha256 is None:
            return
        if not (isinstance(self.data_sha256, str) and _SHA256.fullmatch(self.data_sha256)):
            raise JobConfigError(
                f"data_sha256 must be a SHA-256 in lowercase hex (64 digits, as sha256sum prints it), got "
                f"{self.data_sha256!r}",
                "data_sha256",
            )
        if self.data_path is None:
            raise JobConfigError(
                "data_sha256 needs --data: it is the digest of the token file, and synthetic data has none",
                "data_sha256",
            )

    def _validate_export(self) -> None:
        """The export options' rules. Whether the files exist is checked by the workers, where the paths are
        resolved (a job is judged by its agent in another directory than the one its workers run in)."""
        for name in ("init_from", "export_path", "eval_data_path"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and value.strip()):
                raise JobConfigError(f"--{_flag(name)} must be a file path, got {value!r}", name)
        if self.export_path is not None:
            if not self.checkpoint_dir and self.task == "train":
                raise JobConfigError(
                    "--export-path needs --checkpoint-dir: the export is consolidated from the final sharded "
                    "checkpoint, which is written there",
                    "checkpoint_dir",
                )
            if self.export_path.endswith(("/", os.sep)):
                raise JobConfigError(
                    f"--export-path {self.export_path!r} names a directory; name the weights file, "
                    "e.g. model.safetensors",
                    "export_path",
                )
            target = os.path.normpath(self.export_path)
            for name in ("data_path", "eval_data_path"):
                other = getattr(self, name)
                if other and os.path.normpath(other) == target:
                    raise JobConfigError(
                        f"--export-path {self.export_path!r} is also --{_flag(name)}: the export would "
                        "overwrite the data; choose another file",
                        "export_path",
                    )
        if self.eval_data_path is not None and self.export_path is None:
            raise JobConfigError(
                "--eval-data needs --export-path: the held-out set evaluates the exported weights", "eval_data_path"
            )

    # ---- (de)serialisation ---------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobConfig:
        reject_unknown(data, [f.name for f in dataclasses.fields(cls)])
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path, **overrides: Any) -> JobConfig:
        """A TOML or JSON job file (flat keys, plus a [model_args] table), then explicit overrides."""
        p = Path(path)
        if not p.is_file():
            raise JobConfigError(f"--config {str(p)!r} does not exist")
        text = p.read_text()
        try:
            data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise JobConfigError(f"--config {p}: {exc}") from exc
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(data)
