"""``python -m myolo.kernels.cli.quantize SOURCE --output q.safetensors``: an operator's quantization by hand."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import msgspec
import typer

from myolo.events.payloads.trainer_values import parse_model_args
from myolo.kernels.cli import app

HELP = """\
Quantize a model's linear layers to 8 or 4 bits and write the quantized model (safetensors with packed codes,
scales and zeros) and its manifest <output>.json, printed on stdout; progress goes to stderr.

SOURCE is an export (`python -m myolo.kernels.cli.export`, a job's --export-path; it names its model) or a training
checkpoint directory (give --model and --model-arg; it is exported beside the output first). Schemes: gptq
(needs --calib: it compensates rounding errors on calibration activations), rtn (plain group-wise rounding),
hqq (optimised zero points, no calibration), dynamic_fixed_point (one power-of-two scale per
layer; --calib sets its activation formats). With --eval the source and the quantized model are evaluated on
the same held-out tokens; --calib and --eval must not share tokens. Embeddings and the output head stay in
float unless --layers names them (e.g. --layers 'layers.*' --layers output).
Exit 0 on success, 2 when an input is wrong (the message names it), 1 on any other failure.
"""


def quantize_command(
    source: Annotated[Path, typer.Argument(help="An export (.safetensors) or a checkpoint directory.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The quantized model file to write.")],
    bits: Annotated[int, typer.Option(help="Weight bits: 4 or 8.")] = 4,
    scheme: Annotated[str, typer.Option(help="gptq, rtn, hqq or dynamic_fixed_point.")] = "gptq",
    group_size: Annotated[
        int | None, typer.Option(help="Columns per scale and zero (32..256; 0: whole rows). Default 128 at 4 bits.")
    ] = None,
    calib: Annotated[str | None, typer.Option(help="Calibration token file (flat uint16/uint32 ids).")] = None,
    eval_data: Annotated[str | None, typer.Option("--eval", help="Held-out token file to evaluate both on.")] = None,
    layers: Annotated[list[str] | None, typer.Option(help="Glob of the linears to quantize (repeatable).")] = None,
    calib_sequences: Annotated[int, typer.Option(help="Calibration sequences read at most.")] = 128,
    seq_len: Annotated[int, typer.Option(help="Tokens per calibration and held-out sequence.")] = 256,
    eval_batches: Annotated[int, typer.Option(help="Held-out batches, read in file order.")] = 16,
    eval_batch_size: Annotated[int, typer.Option(help="Sequences per held-out batch.")] = 8,
    data_dtype: Annotated[str, typer.Option(help="Token width of the data files: uint16 or uint32.")] = "uint16",
    model: Annotated[str | None, typer.Option(help="A checkpoint's model preset.")] = None,
    model_arg: Annotated[list[str] | None, typer.Option(help="A checkpoint's model overrides, name=value.")] = None,
    device: Annotated[str, typer.Option(help="Where to calibrate and evaluate: cpu, cuda, cuda:N.")] = "cpu",
) -> None:
    from myolo.kernels.export.weights import WeightsError
    from myolo.kernels.quantization.pipeline import QuantizeSpec, quantize_file
    from myolo.kernels.train.config import JobConfigError

    try:
        spec = QuantizeSpec(
            source=str(source),
            output=str(output),
            bits=bits,
            scheme=scheme,
            group_size=group_size,
            calib=calib,
            eval_data=eval_data,
            model=model,
            model_args=parse_model_args(model_arg),
            layers=tuple(layers) if layers else QuantizeSpec.layers,
            calib_sequences=calib_sequences,
            seq_len=seq_len,
            eval_batches=eval_batches,
            eval_rows=eval_batch_size,
            data_dtype=data_dtype,
            device=device,
        )
        export = quantize_file(spec, progress=lambda text: typer.echo(f"quantize: {text}", err=True))
    except (WeightsError, ValueError, JobConfigError, FileNotFoundError) as exc:
        fail(str(exc))
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(export)).decode() + "\n")


def fail(message: str) -> NoReturn:
    app.fail("quantize", message)


def main() -> None:
    app.run(quantize_command, HELP, log_level="warning")


if __name__ == "__main__":
    main()
