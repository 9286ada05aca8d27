"""``myoloctl registry quantize`` and ``registry quantizations``: quantize a registered version as a job.

The request goes to the leader, which records the run and submits a one-replica job (``task: quantize``);
once it succeeded the quantized model is registered as the version's child. ``--wait`` follows the run until
it is registered or failed, printing each change of state; without it the command returns once the job is
submitted and says how to follow it.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.exits import FAILED, fail
from myolo.coordinator.cli.output import Output, OutputOption, new_console, print_body
from myolo.coordinator.cli.registry import ModelArg
from myolo.coordinator.cli.render import table
from myolo.coordinator.quantize.records import QuantizeRequest, QuantizeRun

SCHEMES = ("gptq", "rtn", "hqq", "dynamic_fixed_point")


def quantize(
    model: ModelArg,
    version: Annotated[int, typer.Argument(min=1, help="The version to quantize (its weights are read).")],
    bits: Annotated[int, typer.Option("--bits", help="Weight bits: 4 or 8.")] = 4,
    scheme: Annotated[str, typer.Option("--scheme", help="gptq, rtn, hqq or dynamic_fixed_point.")] = "gptq",
    group_size: Annotated[
        int | None,
        typer.Option("--group-size", help="Columns per scale and zero (32..256; 0: rows). Default 128 at 4 bits."),
    ] = None,
    calib: Annotated[
        str | None, typer.Option("--calib", help="Calibration token file every node can read (gptq needs it).")
    ] = None,
    eval_data: Annotated[
        str | None,
        typer.Option("--eval", help="Held-out token file: the source and the result are evaluated on it side by side."),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Follow the run until it is registered or failed.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits at most.")] = 3600.0,
    api: ApiOption = None,
) -> None:
    """Quantize VERSION of MODEL with a one-replica job; the result is registered as its child version.

    The new version carries its quantization and both held-out evaluations; it becomes champion only within the model's quantize margin (`registry model set --quantize-margin`). Asking again for the same version and settings is the same run.
    """
    if bits not in (4, 8):
        fail(f"--bits must be 4 or 8, got {bits}")
    if scheme not in SCHEMES:
        fail(f"--scheme {scheme!r} is not one of {list(SCHEMES)}")
    if scheme == "gptq" and calib is None:
        fail("--scheme gptq needs --calib: it learns from calibration inputs")
    request = QuantizeRequest(bits=bits, scheme=scheme, group_size=group_size, calib=calib, eval=eval_data)
    client = ApiClient.from_option(api)
    run = client.quantize(model, version, request)
    verb = "submitted" if client.last_status == 202 else "asked for before"
    console = new_console()
    console.print(escape(f"quantization {run.name} {verb} via {client.last_url}: {_what(run)}"))
    if not wait:
        console.print(escape(f"follow it: myoloctl registry quantizations; myoloctl get job {run.name}"))
        return
    deadline, name = time.monotonic() + timeout, run.name
    while run.state == "running":
        if time.monotonic() > deadline:
            fail(f"still running after {timeout:g} s (--timeout); it goes on: myoloctl get job {name}", FAILED)
        time.sleep(2.0)
        run = client.quantization(name)
    if run.state == "failed":
        fail(f"quantization {run.name} failed: {run.reason}", FAILED)
    console.print(
        escape(
            f"registered as {model} v{run.registered} (parent v{run.version}): myoloctl registry show {model} {run.registered}"
        )
    )


def quantizations(output: OutputOption = Output.table, api: ApiOption = None) -> None:
    """Every quantization run, newest first: the source, the settings, its state and the version it became."""
    listed = ApiClient.from_option(api).quantizations()
    runs = listed.items

    def printer(console: Console) -> None:
        rows = [
            [
                r.name,
                f"{r.model} v{r.version}",
                _what(r),
                r.state,
                f"v{r.registered}" if r.registered else "-",
                r.reason or "-",
            ]
            for r in runs
        ]
        table(console, ("RUN", "SOURCE", "SETTINGS", "STATE", "BECAME", "REASON"), rows)

    print_body(listed, output, printer)


def _what(run: QuantizeRun) -> str:
    r = run.request
    group = "rows" if r.group_size == 0 else f"g{r.group_size}" if r.group_size else "default groups"
    return (
        f"{r.scheme} {r.bits}-bit {group}"
        + (f", calib {r.calib}" if r.calib else "")
        + (f", eval {r.eval}" if r.eval else "")
    )
