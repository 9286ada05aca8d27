"""The trainer's job: the contract's ``TrainerJob`` plus what only the trainer knows, and the rules that need
the world size or the model registry. Every bad combination fails before any process starts.

A job fixes the *global* batch; the data-parallel degree only changes how many microbatches each
replica accumulates, so the optimisation is identical at any dp (what makes elastic resizing safe).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec
import structlog

from myolo.events.payloads.trainer_flat import flat_keys, sectioned
from myolo.events.payloads.trainer_job import Help, TrainerJob, TrainerJobError, decode
from myolo.kernels.model.config import PRESETS, ModelConfig, preset
from myolo.kernels.parallel.layout import Layout

# a job's fields or their combination are invalid; the message names the field, its flag and the fix
JobConfigError = TrainerJobError
log = structlog.get_logger("myolo.kernels.train")


class JobConfig(TrainerJob, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A ``TrainerJob`` as the trainer runs it: with the world size and the job's id."""

    nproc: Annotated[int, msgspec.Meta(ge=1, le=1 << 20), Help("Worker processes (world size).")] = 1
    job_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256), Help("Job id in reports and snapshots.")] = (
        "standalone"
    )

    # ---- derived -------------------------------------------------------------------------------
    def model_config(self) -> ModelConfig:
        at_fault = "model.args" if self.model.name in PRESETS else "model.name"
        try:
            return preset(self.model.name, **self.model.args)
        except (ValueError, TypeError, ArithmeticError) as exc:  # ArithmeticError: sizes too large to compute
            raise JobConfigError.at(at_fault, str(exc)) from exc

    def layout(self) -> Layout:
        par = self.parallelism
        dp = par.dp or max(1, self.nproc // max(1, par.pp * par.tp))
        return Layout(pp=par.pp, dp=dp, tp=par.tp)

    def rows_per_replica(self) -> int:
        return self.data.global_batch // self.layout().dp

    def micro_rows(self) -> int:
        if self.data.micro_batch:
            return self.data.micro_batch
        par = self.parallelism
        want = par.pp * par.stages_per_rank if par.pp > 1 else 1
        return max(1, self.rows_per_replica() // want)

    def n_microbatches(self) -> int:
        """Microbatches each replica runs per step: pipeline microbatches or accumulation steps."""
        return self.rows_per_replica() // self.micro_rows()

    # ---- validation ----------------------------------------------------------------------------
    def validate(self, world_size: int | None = None) -> JobConfig:  # type: ignore[override]
        """The contract's rules, then the world's and the model's; returns self for chaining."""
        super().validate()
        world = world_size if world_size is not None else self.nproc
        self._validate_world(world)
        self._validate_model()
        self._validate_batch()
        return self

    def _validate_world(self, world: int) -> None:
        par = self.parallelism
        if par.pp * par.tp > world or world % (par.pp * par.tp):
            raise JobConfigError.at(
                "parallelism.tp" if world % par.tp else "parallelism.pp",
                f"layout pp={par.pp} x tp={par.tp} does not divide the world size {world}: "
                f"choose --nproc as a multiple of pp*tp={par.pp * par.tp} or change --pp/--tp",
            )
        lay = self.layout()
        if lay.world != world:
            raise JobConfigError.at(
                "parallelism.dp",
                f"layout {lay} needs {lay.world} processes but the world size is {world}: "
                f"set --dp {world // (par.pp * par.tp)} or --nproc {lay.world}",
            )
        if par.sync_every > 1 and lay.dp == 1:
            raise JobConfigError.at("parallelism.sync_every", "above 1 (local SGD) needs dp > 1 replicas to average")
        if self.runtime.task == "quantize" and world != 1:
            raise JobConfigError.at(
                "runtime.task", f"quantize runs on one worker, not {world}: give it one replica of one GPU"
            )

    def _validate_model(self) -> None:
        cfg, tp = self.model_config(), self.parallelism.tp
        if cfg.n_heads % tp or cfg.kv_heads % tp:
            raise JobConfigError.at(
                "parallelism.tp",
                f"model {self.model.name!r} has {cfg.n_heads} heads ({cfg.kv_heads} KV heads), not divisible "
                f"by tp={tp}: choose --tp dividing {cfg.kv_heads} or set --model-arg n_heads=...",
            )
        if cfg.vocab_size % tp or cfg.hidden % tp:
            raise JobConfigError.at(
                "model.args",
                f"vocab_size {cfg.vocab_size} and MLP hidden {cfg.hidden} must be divisible by tp={tp}: "
                "pad --model-arg vocab_size=... to a multiple of tp or change --tp",
            )
        if self.data.seq_len % tp:
            raise JobConfigError.at(
                "data.seq_len", f"{self.data.seq_len} must be divisible by tp={tp} (sequence parallelism shards it)"
            )
        if self.data.seq_len > cfg.max_seq_len:
            raise JobConfigError.at(
                "data.seq_len", f"{self.data.seq_len} exceeds the model's max_seq_len {cfg.max_seq_len}: lower it"
            )
        par = self.parallelism
        if par.pp > 1 and par.pp * par.stages_per_rank > cfg.n_layers:
            raise JobConfigError.at(
                "parallelism.pp",
                f"{par.pp * par.stages_per_rank} pipeline stages exceed the model's {cfg.n_layers} layers: lower --pp",
            )

    def _validate_batch(self) -> None:
        lay, batch = self.layout(), self.data.global_batch
        if batch % lay.dp:
            raise JobConfigError.at(
                "data.global_batch", f"{batch} is not divisible by dp={lay.dp}: use a multiple of {lay.dp}"
            )
        per = self.rows_per_replica()
        if per % self.micro_rows():
            raise JobConfigError.at(
                "data.micro_batch",
                f"the per-replica batch {per} (global {batch} / dp {lay.dp}) is not divisible by the micro batch "
                f"{self.micro_rows()}: choose a micro batch dividing {per}",
            )
        par = self.parallelism
        if par.pp == 1:
            return
        n_mb = self.n_microbatches()
        if n_mb < par.pp:
            raise JobConfigError.at(
                "data.micro_batch",
                f"{n_mb} microbatches per step is fewer than the {par.pp} pipeline stages (the pipeline would "
                f"hang): lower --micro-batch or raise --global-batch to at least {par.pp * lay.dp * self.micro_rows()}",
            )
        if par.schedule == "interleaved1f1b" and n_mb % par.pp:
            raise JobConfigError.at(
                "data.micro_batch", f"interleaved 1F1B needs microbatches ({n_mb}) to be a multiple of pp={par.pp}"
            )

    # ---- (de)serialisation ---------------------------------------------------------------------
    def to_json(self) -> str:
        return msgspec.json.encode(self).decode()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobConfig:
        """A job from its sections (``{"optimizer": {"lr": 1e-3}}``); a wrong field raises JobConfigError."""
        return decode(data, cls)

    @classmethod
    def load(cls, path: str | Path, fields: Mapping[str, Any] | None = None) -> JobConfig:
        """A TOML or JSON job file (a table per section: ``[optimizer] lr = 1e-3``), then ``fields`` by path."""
        p = Path(path)
        if not p.is_file():
            raise JobConfigError(f"--config {str(p)!r} does not exist: give the job file's path")
        text = p.read_text()
        try:
            data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise JobConfigError(f"--config {p}: {exc}") from exc
        if not isinstance(data, dict):
            raise JobConfigError(f"--config {p}: expected a table of sections, got {type(data).__name__}")
        if moved := flat_keys(data, job_type=cls):  # a job file written before the sections: read, and say so
            log.warning("job file read from the flat form; write it by section", file=str(p), moved=moved)
            data = sectioned(data, job_type=cls)
        return cls.from_fields(fields or {}, data)
