"""``myoloctl registry quantize`` and ``registry quantizations``: quantize a registered version as a job.

The request goes to the leader, which records the run and submits a one-replica job (``task: quantize``);
once it succeeded the quantized model is registered as the version's child. ``--wait`` follows the run until
it is registered or failed, printing each change of state; without it the command returns once the job is
submitted and says how to follow it.
"""

from __future__ import annotations

import time
from typing import Annotated

import msgspec
import typer
from rich.console import Console
from rich.markup import escape

from myolo.coordinator.cli.client import ApiOption
from myolo.coordinator.cli.exits import ask
from myolo.coordinator.cli.get import Output, OutputOption
from myolo.coordinator.cli.registry import ModelArg, _path, _read, fail, new_console, print_body
from myolo.coordinator.cli.render import table
from myolo.coordinator.quantize.records import QuantizeRun

SCHEMES = ("gptq", "rtn", "hqq", "dynamic_fixed_point")


class RunList(msgspec.Struct, kw_only=True):
    items: list[QuantizeRun]


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
    body = {"bits": bits, "scheme": scheme, "group_size": group_size, "calib": calib, "eval": eval_data}
    body = {k: v for k, v in body.items() if v is not None}
    client, answer = ask(api, lambda c: c.post(_path(model, "versions", str(version), "quantize"), body))
    run = _read(answer, QuantizeRun)
    verb = "submitted" if client.last_status == 202 else "asked for before"
    console = new_console()
    console.print(escape(f"quantization {run.name} {verb} via {client.last_url}: {_what(run)}"))
    if not wait:
        console.print(escape(f"follow it: myoloctl registry quantizations; myoloctl get job {run.name}"))
        return
    deadline, name = time.monotonic() + timeout, run.name
    while run.state == "running":
        if time.monotonic() > deadline:
            fail(f"still running after {timeout:g} s (--timeout); it goes on: myoloctl get job {name}", code=1)
        time.sleep(2.0)
        _, answer = ask(api, lambda c: c.get(f"/v1/quantizations/{name}"))
        run = _read(answer, QuantizeRun)
    if run.state == "failed":
        fail(f"quantization {run.name} failed: {run.reason}", code=1)
    console.print(
        escape(
            f"registered as {model} v{run.registered} (parent v{run.version}): myoloctl registry show {model} {run.registered}"
        )
    )


def quantizations(output: OutputOption = Output.table, api: ApiOption = None) -> None:
    """Every quantization run, newest first: the source, the settings, its state and the version it became."""
    _, body = ask(api, lambda c: c.get("/v1/quantizations"))
    runs = _read(body, RunList).items

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

    print_body(body, output, printer)


def _what(run: QuantizeRun) -> str:
    r = run.request
    group = "rows" if r.group_size == 0 else f"g{r.group_size}" if r.group_size else "default groups"
    return (
        f"{r.scheme} {r.bits}-bit {group}"
        + (f", calib {r.calib}" if r.calib else "")
        + (f", eval {r.eval}" if r.eval else "")
    )
