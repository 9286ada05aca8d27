"""``myoloctl registry verify-watermark MODEL VERSION --key-file F``: is this registered model the owner's?

The registry keeps, for a version it knows to be marked, a commitment to the key (never the key). The key file
is checked against it here, before anything heavy runs; then the check itself runs where torch is, in
``python -m myolo.kernels.cli.watermark verify`` (the coordinator never imports torch), on the version's artifact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from myolo.common.errors import ConfigError
from myolo.common.keys import load_secret, watermark_commitment
from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.exits import FAILED, OK, REFUSED, fail
from myolo.coordinator.cli.output import new_console
from myolo.coordinator.cli.registry import ModelArg, is_url, local_path

TRAINER_NOT_MARKED = 3  # what python -m myolo.kernels.cli.watermark exits with for a model it finds unmarked


def verify_watermark(
    model: ModelArg,
    version: Annotated[int, typer.Argument(min=1, help="The version whose weights are checked.")],
    key_file: Annotated[Path, typer.Option("--key-file", "-k", help="The owner's watermark key file (mode 0600).")],
    reference: Annotated[
        Path | None,
        typer.Option("--reference", help="The owner's marked export: undoes a neuron permutation before reading."),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds the check may take.")] = 600.0,
    api: ApiOption = None,
) -> None:
    """Check a registered version's weights for the key's watermark: bits matched, BER, p-value, verdict.

    Exit 0 when marked, 1 when not (the check failed), 2 when the key is not the one the registry recorded for this version or an input is wrong.
    """
    try:
        mine = watermark_commitment(load_secret(key_file, "--key-file"))
    except ConfigError as exc:
        fail(str(exc))
    answer = ApiClient.from_option(api).version(model, version)
    console = new_console()
    if answer.watermark is not None and answer.watermark.commitment != mine:
        fail(
            f"the key in {key_file} is not the one that marked {model} version {version}: the registry records "
            f"commitment {answer.watermark.commitment[:16]}..., this key's is {mine[:16]}..."
        )
    if answer.watermark is None:
        console.print(escape(f"{model} version {version} is not recorded as marked; checking its weights anyway"))
    if is_url(answer.artifact):
        fail(
            f"the artifact {answer.artifact} is not a local file: fetch it, then python -m myolo.kernels.cli.watermark verify"
        )
    artifact = local_path(answer.artifact)
    cmd = [
        sys.executable,
        "-m",
        "myolo.kernels.cli.watermark",
        "verify",
        str(artifact),
        "--key-file",
        str(key_file),
        "--json",
    ]
    if reference is not None:
        cmd += ["--reference", str(reference)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        fail(f"the check did not finish within {timeout:g} s (--timeout)", FAILED)
    if done.returncode not in (0, TRAINER_NOT_MARKED):
        code = REFUSED if done.returncode == REFUSED else FAILED  # the trainer's 2 is a bad input, as ours
        fail(done.stderr.strip() or f"the check failed with exit code {done.returncode}", code)
    result = json.loads(done.stdout)
    console.print(
        escape(
            f"{model} version {version} ({artifact}): {result['matched']}/{result['bits']} bits match, "
            f"BER {result['ber']:.4f}, p = {result['p_value']:.3g}; marked needs p < {result['alpha']:g}: "
            + ("MARKED" if result["marked"] else "NOT MARKED")
        )
    )
    raise typer.Exit(OK if result["marked"] else FAILED)
