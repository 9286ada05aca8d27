"""``python -m myolo.kernels.cli.export CHECKPOINT --output model.safetensors``: an operator's export by hand.

The same export a job with ``--export-path`` makes at its end (``myolo.kernels.export.pipeline``), from any
checkpoint a run left: one process, no process group, whatever tp/pp/dp layout wrote it. Writes the weights
and ``<output>.json`` (``myolo.events.payloads.ModelExport``) and prints that manifest on stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import msgspec
import typer

from myolo.events.payloads.trainer_values import parse_model_args
from myolo.kernels.cli import app
from myolo.kernels.train.config import JobConfigError

HELP = """\
Consolidate a sharded training checkpoint into one safetensors file of full model weights, optionally
evaluate it on a held-out token file, and write the manifest <output>.json beside it (printed on stdout).

CHECKPOINT is a run's --checkpoint-dir (its latest.json names the checkpoint to export) or one of its
step-NNNNNNNN directories. --model and --model-arg must be the job's: the weights are checked against them.
Exit 0 on success, 2 when an input is wrong (the message names it), 1 on any other failure.
"""


def export_command(
    checkpoint: Annotated[Path, typer.Argument(help="Checkpoint directory (with latest.json) or a step directory.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The safetensors file to write.")],
    model: Annotated[str, typer.Option(help="The job's model preset: tiny, small, 1b.")] = "tiny",
    model_arg: Annotated[
        list[str] | None, typer.Option(help="The job's model overrides, name=value (repeatable).")
    ] = None,
    eval_data: Annotated[
        str | None, typer.Option(help="Held-out token file (flat uint16/uint32 ids) to evaluate the weights on.")
    ] = None,
    eval_batches: Annotated[int, typer.Option(help="Held-out batches, read in file order.")] = 16,
    eval_batch_size: Annotated[int, typer.Option(help="Sequences per held-out batch (the job's global batch).")] = 8,
    seq_len: Annotated[int, typer.Option(help="Tokens per held-out sequence.")] = 64,
    data_dtype: Annotated[str, typer.Option(help="Token width of the held-out file: uint16 or uint32.")] = "uint16",
    data: Annotated[
        str | None, typer.Option(help="The training token file, whose SHA-256 goes in the manifest.")
    ] = None,
    init_from: Annotated[
        str | None, typer.Option(help="The weights the run started from, recorded in the manifest.")
    ] = None,
    device: Annotated[str, typer.Option(help="Where to evaluate: cpu, cuda, cuda:N.")] = "cpu",
) -> None:
    from myolo.kernels.export.pipeline import ExportSpec, export_checkpoint
    from myolo.kernels.export.weights import WeightsError

    for name, value in (
        ("--eval-batches", eval_batches),
        ("--eval-batch-size", eval_batch_size),
        ("--seq-len", seq_len),
    ):
        if value < 1:
            fail(f"{name} must be >= 1, got {value}")
    if data_dtype not in ("uint16", "uint32"):
        fail(f"--data-dtype must be uint16 or uint32, got {data_dtype!r}")
    try:
        spec = ExportSpec(
            model=model,
            model_args=parse_model_args(model_arg),
            seq_len=seq_len,
            eval_data=eval_data,
            eval_batches=eval_batches,
            eval_rows=eval_batch_size,
            data_dtype=data_dtype,
            data_path=data,
            init_from=init_from,
            device=device,
        )
        spec.model_config()  # an unknown preset or knob, before any file is read
        export = export_checkpoint(checkpoint, output, spec)
    except (JobConfigError, WeightsError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    sys.stdout.write(msgspec.json.encode(export).decode() + "\n")


def fail(message: str) -> NoReturn:
    app.fail("export", message)


def main() -> None:
    app.run(export_command, HELP, log_level="info")


if __name__ == "__main__":
    main()
