"""``python -m myolo.kernels.cli.watermark keygen|embed|verify``: a model owner's keyed watermark, by hand."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from myolo.common.errors import ConfigError
from myolo.common.logs import configure_logging
from myolo.kernels.cli import app as cli_app

PROG = "watermark"
HELP = (
    "A keyed watermark in a model's weights, proven with a p-value (docs/watermark.md).\n\n"
    "keygen writes a new key file (32 random bytes, mode 0600). embed marks a float export by a short fine-tune "
    "on your training data and writes a new export with its manifest. verify reads the mark back: the bits that "
    "match, the bit error rate, the p-value under the null of an unmarked model and the verdict (marked when "
    "p < alpha). The key never leaves the key file: files, manifests and the registry hold only its commitment."
    "\n\nExit codes: 0 done (verify: marked), 3 verify: not marked, 2 a wrong input (the message names it), "
    "1 any other failure."
)

app = typer.Typer(name=PROG, help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
KeyFile = Annotated[Path, typer.Option("--key-file", "-k", help="The watermark key file (mode 0600).")]
EXIT_NOT_MARKED = 3


@app.command()
def keygen(path: Annotated[Path, typer.Argument(help="Where to write the new key (never overwritten).")]) -> None:
    """Write a new random key file, mode 0600, and print its commitment (what records of it show)."""
    from myolo.common.keys import watermark_commitment, write_secret

    try:
        secret = write_secret(path)
    except FileExistsError:
        cli_app.fail(PROG, f"{path} exists; a key is never overwritten (pick another path, or remove it yourself)")
    except OSError as exc:
        cli_app.fail(PROG, f"cannot write {path}: {exc.strerror}")
    typer.echo(f"wrote {path} (mode 0600); commitment {watermark_commitment(secret)}")


@app.command()
def embed(
    source: Annotated[Path, typer.Argument(help="The float export to mark (.safetensors).")],
    key_file: KeyFile,
    data: Annotated[str, typer.Option(help="Training token file (flat uint16/uint32 ids): the job's data.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The marked export to write.")],
    steps: Annotated[int, typer.Option(help="Fine-tuning steps.")] = 200,
    lr: Annotated[float, typer.Option(help="AdamW learning rate of the fine-tune.")] = 1e-4,
    batch: Annotated[int, typer.Option(help="Sequences per step.")] = 8,
    seq_len: Annotated[int, typer.Option(help="Tokens per sequence.")] = 256,
    eval_data: Annotated[str | None, typer.Option("--eval", help="Held-out token file: both models on it.")] = None,
    eval_batches: Annotated[int, typer.Option(help="Held-out batches.")] = 16,
    bits: Annotated[int, typer.Option(help="Bits of the mark.")] = 256,
    margin: Annotated[float, typer.Option(help="Each projection's margin (in its spread when unmarked).")] = 2.0,
    data_dtype: Annotated[str, typer.Option(help="uint16 or uint32.")] = "uint16",
) -> None:
    """Mark SOURCE and write OUTPUT with its manifest (<output>.json, printed on stdout)."""
    from myolo.kernels.export.weights import WeightsError
    from myolo.kernels.watermark.files import EmbedSpec, embed_file
    from myolo.kernels.watermark.mark import DigitalWatermark

    say = _progress()
    try:
        mark = DigitalWatermark.from_key_file(str(key_file), bits=bits, margin=margin)
        spec = EmbedSpec(
            source=str(source), output=str(output), data=data, steps=steps, lr=lr, batch=batch, seq_len=seq_len,
            eval_data=eval_data, eval_batches=eval_batches, data_dtype=data_dtype,
        )  # fmt: skip
        done = embed_file(mark, spec, progress=say)
    except (ConfigError, WeightsError, ValueError, FileNotFoundError) as exc:
        cli_app.fail(PROG, str(exc))
    r = done.report
    say(f"embedded: {r.bits_at_margin}/{r.bits} bits at the margin, weakest {r.min_margin:+.3f}")
    if done.source_eval is not None and done.export.eval is not None:
        cost = done.export.eval.perplexity / done.source_eval.perplexity - 1
        say(f"held-out perplexity {done.source_eval.perplexity:.4f} -> {done.export.eval.perplexity:.4f} ({cost:+.2%})")
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(done.export)).decode() + "\n")


@app.command()
def verify(
    file: Annotated[Path, typer.Argument(help="A model file: an export or a quantized model.")],
    key_file: KeyFile,
    reference: Annotated[
        Path | None, typer.Option(help="The owner's marked export: undoes a neuron permutation before reading.")
    ] = None,
    commitment: Annotated[
        str | None, typer.Option(help="The commitment a record names: refuse a key that is not that one.")
    ] = None,
    bits: Annotated[int, typer.Option(help="Bits of the mark, when the file's header does not say.")] = 256,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Read the mark of FILE with the key: bits matched, BER, p-value and the verdict."""
    from myolo.kernels.export.weights import WeightsError
    from myolo.kernels.watermark.files import verify_file
    from myolo.kernels.watermark.mark import WatermarkSettings
    from myolo.kernels.watermark.secret import WatermarkKey

    try:
        key = WatermarkKey.from_file(key_file, "--key-file")
        if commitment is not None and commitment != key.commitment:
            cli_app.fail(
                PROG,
                f"the key in {key_file} is not the one recorded (its commitment is {key.commitment[:16]}..., "
                f"the record's {commitment[:16]}...)",
            )
        result, record = verify_file(file, key, reference=reference, settings=WatermarkSettings(bits=bits))
    except (ConfigError, WeightsError, ValueError, FileNotFoundError) as exc:
        cli_app.fail(PROG, str(exc))
    if json_out:
        sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    else:
        moved = sum(result.realigned.values())
        typer.echo(
            f"{file}: {result.matched}/{result.bits} bits match, BER {result.ber:.4f}, "
            f"p = {result.p_value:.3g} (log10 p = {result.log10_p:.1f}); marked needs p < {result.alpha:g} "
            f"({result.threshold_bits} bits): {result.verdict.upper()}"
        )
        if record is None:
            typer.echo("  (the file's header names no mark: read with the settings given)")
        if reference is not None:
            typer.echo(f"  re-aligned to {reference}: {moved} units moved")
    raise typer.Exit(0 if result.marked else EXIT_NOT_MARKED)


def _progress() -> Callable[[str], None]:
    return lambda text: typer.echo(f"{PROG}: {text}", err=True)


def main() -> None:
    configure_logging("warning", stream=sys.stderr)
    app()


if __name__ == "__main__":
    main()
