"""The job options shared by the launcher and the worker, as one Typer signature.

Precedence: built-in defaults < ``--config`` file (TOML or JSON) < flags given on the command line.
Flags default to None so that "not given" can be told apart from "given the default value".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from myolo.kernels.train.config import JobConfig, JobConfigError


def parse_model_args(items: list[str] | None) -> dict[str, Any]:
    """``--model-arg n_layers=8`` pairs; values are parsed as int, float or bool when they look like one."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise JobConfigError(f"--model-arg {item!r} must look like name=value, e.g. n_layers=8", "model_args")
        key, raw = item.split("=", 1)
        value: Any = raw
        for conv in (int, float):
            try:
                value = conv(raw)
                break
            except ValueError:
                continue
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        out[key.strip()] = value
    return out


def parse_ops(items: list[str] | None) -> dict[str, list[str]]:
    """``--ops rms_norm=triton,native`` / ``--ops '*=reference'``: backend order per fused op."""
    out: dict[str, list[str]] = {}
    for item in items or []:
        op, sep, names = item.partition("=")
        if not sep or not op.strip() or not names.strip():
            raise JobConfigError(
                f"--ops {item!r} must look like op=backend[,backend...], e.g. rms_norm=triton,native", "ops_prefer"
            )
        out[op.strip()] = [n.strip() for n in names.split(",") if n.strip()]
    return out


def build_job(config: Path | None, flags: dict[str, Any]) -> JobConfig:
    given = {k: v for k, v in flags.items() if v is not None}
    model_args = parse_model_args(given.pop("model_arg", None))
    ops_prefer = parse_ops(given.pop("ops", None))
    job = JobConfig.load(config, **given) if config is not None else JobConfig.from_dict(given)
    if model_args:
        job.model_args = {**job.model_args, **model_args}
    if ops_prefer:
        job.ops_prefer = {**job.ops_prefer, **ops_prefer}
    return job


Runner = Callable[[JobConfig, bool], None]


def make_command(runner: Runner) -> Callable[..., None]:
    """A Typer command with every job option that hands the resolved JobConfig to ``runner``."""

    def command(
        nproc: Annotated[int | None, typer.Option(help="Worker processes (world size).")] = None,
        pp: Annotated[int | None, typer.Option(help="Pipeline-parallel degree.")] = None,
        dp: Annotated[int | None, typer.Option(help="Data-parallel degree (default: nproc/(pp*tp)).")] = None,
        tp: Annotated[int | None, typer.Option(help="Tensor-parallel degree.")] = None,
        model: Annotated[str | None, typer.Option(help="Model preset: tiny, small, 1b.")] = None,
        model_arg: Annotated[
            list[str] | None, typer.Option(help="Override a model knob, name=value (repeatable).")
        ] = None,
        ops: Annotated[
            list[str] | None, typer.Option(help="Backend order for a fused op: op=backend[,backend] (repeatable).")
        ] = None,
        steps: Annotated[int | None, typer.Option(help="Optimizer steps.")] = None,
        seed: Annotated[int | None, typer.Option(help="Seed for init and data.")] = None,
        global_batch: Annotated[int | None, typer.Option(help="Sequences per step, all replicas.")] = None,
        micro_batch: Annotated[int | None, typer.Option(help="Sequences per microbatch per replica.")] = None,
        seq_len: Annotated[int | None, typer.Option(help="Tokens per sequence.")] = None,
        lr: Annotated[float | None, typer.Option(help="Peak learning rate.")] = None,
        warmup_steps: Annotated[int | None, typer.Option(help="Linear warm-up steps.")] = None,
        grad_clip: Annotated[float | None, typer.Option(help="Global-norm clip (0: off).")] = None,
        schedule: Annotated[str | None, typer.Option(help="Pipeline schedule: 1f1b, interleaved1f1b.")] = None,
        stages_per_rank: Annotated[int | None, typer.Option(help="Pipeline stages per rank.")] = None,
        sync_every: Annotated[
            int | None, typer.Option(help="1: synchronous; H>1: local SGD averaging every H steps.")
        ] = None,
        compile: Annotated[bool | None, typer.Option("--compile/--no-compile", help="torch.compile blocks.")] = None,
        device: Annotated[str | None, typer.Option(help="auto, cpu or cuda.")] = None,
        data: Annotated[str | None, typer.Option(help="Token file (flat uint16/uint32 ids).")] = None,
        data_dtype: Annotated[str | None, typer.Option(help="uint16 or uint32.")] = None,
        checkpoint_dir: Annotated[str | None, typer.Option(help="Directory for sharded checkpoints.")] = None,
        checkpoint_every: Annotated[int | None, typer.Option(help="Save every N steps (0: off).")] = None,
        snapshot_every: Annotated[int | None, typer.Option(help="Shared-memory snapshot every N steps.")] = None,
        resume: Annotated[bool | None, typer.Option("--resume/--no-resume", help="Resume from latest.")] = None,
        init_from: Annotated[
            str | None,
            typer.Option(help="Safetensors weights (an earlier export) to start from when not resuming a checkpoint."),
        ] = None,
        export_path: Annotated[
            str | None,
            typer.Option(
                help="After the last step, rank 0 writes the final weights here (safetensors) and a manifest "
                "<path>.json (checksums, eval); needs --checkpoint-dir."
            ),
        ] = None,
        eval_data: Annotated[
            str | None,
            typer.Option(help="Held-out token file (like --data) the exported weights are evaluated on."),
        ] = None,
        eval_batches: Annotated[
            int | None, typer.Option(help="Held-out batches of --global-batch rows, read in file order.")
        ] = None,
        defense: Annotated[
            str | None,
            typer.Option(
                help="Gradient-leakage defense of the data-parallel exchange: none or gradient_compression (top-k "
                "with error feedback; the vocabulary's rows by a data-independent draw). docs/defense.md."
            ),
        ] = None,
        param: Annotated[
            float | None, typer.Option(help="--defense gradient_compression: share of coordinates sent (0.01).")
        ] = None,
        defense_momentum: Annotated[
            float | None, typer.Option(help="Momentum correction of the compressed exchange (0: error feedback).")
        ] = None,
        defense_exchange: Annotated[
            str | None,
            typer.Option(
                help="What the defended exchange sends: gradient (the default) or update (each replica steps AdamW "
                "on its own gradient and the change is compressed and averaged; converges closer to dense)."
            ),
        ] = None,
        defense_warmup_steps: Annotated[
            int | None,
            typer.Option(
                help="Steps over which the share of coordinates sent ramps from all of them down to --param (0: "
                "none). The vocabulary's rows stay at --param; the rest leave near-dense early on."
            ),
        ] = None,
        defense_vocab_param: Annotated[
            float | None,
            typer.Option(
                help="Share of the vocabulary's rows (embedding and head) drawn each step (default: --param). A "
                "larger share trains the embedding faster and names that share of the batch's tokens."
            ),
        ] = None,
        watermark: Annotated[
            str | None,
            typer.Option(help="Watermark key file (mode 0600): embed its mark while training. docs/watermark.md."),
        ] = None,
        nccl_algo: Annotated[
            str | None,
            typer.Option(help="NCCL's algorithm on GPUs: auto (NCCL chooses per call), ring or tree (NCCL_ALGO)."),
        ] = None,
        deterministic: Annotated[
            bool | None,
            typer.Option(
                "--deterministic/--fast",
                help="Deterministic kernels, seeded data order and dropout: bit-identical runs (the default); "
                "--fast lets the fastest kernels run (cudnn.benchmark).",
            ),
        ] = None,
        job_id: Annotated[str | None, typer.Option(help="Job id used in reports and snapshot names.")] = None,
        config: Annotated[Path | None, typer.Option(help="Job file (TOML or JSON); flags override it.")] = None,
        json_output: Annotated[bool, typer.Option("--json", help="One JSON object per step on stdout.")] = False,
    ) -> None:
        flags = dict(locals())
        for name in ("config", "json_output", "runner"):
            flags.pop(name, None)
        flags["data_path"] = flags.pop("data")
        flags["eval_data_path"] = flags.pop("eval_data")
        flags["defense_param"] = flags.pop("param")
        try:
            job = build_job(config, flags)
        except (JobConfigError, TypeError) as exc:
            typer.echo(f"myolo-train: error: {exc}", err=True)
            raise typer.Exit(2) from None
        runner(job, json_output)

    return command
