"""``myolo-generate``: continue a prompt with a trained model; the text on stdout, the speed on stderr."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from myolo.kernels.cli import app

HELP = """\
Continue a prompt with a model: prefill, then decode token by token with a KV cache. The prompt comes from
--prompt-file, or stdin; the continuation goes to stdout, and the prefill and decode speeds (tokens/s) to
stderr, so `myolo-generate ... > out.txt` keeps only the text.

WEIGHTS is an export (`python -m myolo.kernels.cli.export`, or a job's --export-path); its header names the model
preset and overrides, so --model is only needed for files that do not. Byte-level models (vocabulary 256)
read and write UTF-8 text; with --tokens the prompt and the output are whitespace-separated token ids.
--temperature 0 is greedy; above 0 it samples, from the --top-k most likely tokens when given, seeded by
--seed. Exit 0 on success, 2 when an input is wrong (the message names it), 1 on any other failure.
"""

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def generate_command(
    weights: Annotated[Path, typer.Argument(help="The model's safetensors file.")],
    prompt_file: Annotated[Path | None, typer.Option(help="Read the prompt from this file (default: stdin).")] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", "-n", help="Tokens to add at most.")] = 128,
    temperature: Annotated[float, typer.Option(help="0: greedy; > 0: sample with this temperature.")] = 0.0,
    top_k: Annotated[int | None, typer.Option(help="Sample from the k most likely tokens only.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sampling.")] = 0,
    tokens: Annotated[bool, typer.Option("--tokens", help="Prompt and output are token ids, not text.")] = False,
    model: Annotated[str | None, typer.Option(help="Model preset, when the file does not name one.")] = None,
    dtype: Annotated[str, typer.Option(help="Compute dtype: fp32, bf16 or fp16.")] = "fp32",
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    threads: Annotated[int | None, typer.Option(help="CPU threads (torch.set_num_threads).")] = None,
) -> None:
    import torch

    from myolo.kernels.export.weights import WeightsError
    from myolo.kernels.infer import text
    from myolo.kernels.infer.generate import Sampling, generate
    from myolo.kernels.infer.load import load_model

    if dtype not in DTYPES:
        fail(f"--dtype {dtype!r} is not one of {sorted(DTYPES)}")
    if threads is not None:
        if threads < 1:
            fail(f"--threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    try:
        raw = prompt_file.read_text() if prompt_file is not None else sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read the prompt {prompt_file or 'from stdin'}: {exc}")
    try:
        sampling = Sampling(temperature=temperature, top_k=top_k, seed=seed)
        gpt, cfg = load_model(weights, model=model, dtype=getattr(torch, DTYPES[dtype]), device=device)
        if not tokens and cfg.vocab_size < text.BYTE_VOCAB:
            fail(f"the model's vocabulary has {cfg.vocab_size} tokens, too few for bytes: pass --tokens")
        ids = text.parse_ids(raw) if tokens else text.encode(raw)
        out = generate(gpt, cfg, torch.tensor([ids], dtype=torch.long), max_new_tokens, sampling)
    except (WeightsError, ValueError) as exc:
        fail(str(exc))
    new = out.tokens[0]
    sys.stdout.write(" ".join(map(str, new)) + "\n" if tokens else text.decode(new))
    sys.stdout.flush()
    typer.echo(
        f"prefill {out.prompt_tokens} tokens in {out.prefill_s * 1e3:.1f} ms ({out.prefill_tokens_per_s:.0f} tokens/s); "
        f"decode {out.new_tokens - 1} tokens in {out.decode_s * 1e3:.1f} ms ({out.decode_tokens_per_s:.1f} tokens/s)",
        err=True,
    )


def fail(message: str) -> NoReturn:
    app.fail("myolo-generate", message)


def main() -> None:
    app.run(generate_command, HELP, log_level="warning")


if __name__ == "__main__":
    main()
