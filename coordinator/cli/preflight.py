"""``myoloctl preflight [NODE...]``: the pre-upgrade checklist, run by the leader through the agents.

The coordinator does the work (``coordinator/preflight/``); this prints its report
as a table (node, check, value, threshold, PASS/FAIL/SKIP, reason) or as the API's JSON/YAML, and exits
0 when no check failed, 1 when one did (or the coordinator could not be asked), 2 for bad input.
"""

from __future__ import annotations

import enum
import re
from typing import Annotated

import msgspec
import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from myolo.coordinator.cli import render
from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.exits import FAILED, fail
from myolo.coordinator.cli.output import Output, OutputOption, print_body
from myolo.coordinator.preflight.config import MAX_TIMEOUT_S
from myolo.coordinator.preflight.records import CHECKS, DEFAULT_MIN_DRIVER, PreflightReport, PreflightRequest

ANSWER_MARGIN_S = 30.0  # beyond the run's own timeout, for the report to come back
_DIGEST = re.compile(r"\b[0-9a-f]{64}\b")
VERDICT_STYLES = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow"}

HELP = (
    "Run the pre-upgrade checklist on NODE... (default: every Ready node) and print one row per node and "
    "check, exiting 0 only when no check FAILed.\n\n"
    "Checks: driver (the GPU driver the node's samples report, >= --min-driver: 515.65.01 is what CUDA 11.7 "
    "needs); memory (every GPU keeps >= --min-free-memory % free, the OOM killer's margin); cuda (the CUDA and "
    "cuDNN the trainer's torch loads on the node against the driver's CUDA, --min-cuda and --min-cudnn; SKIP on "
    "a CPU build or simulated GPUs); data (each job "
    "running on the node: its data file's SHA-256, computed by the node's agent on a signed hash_files "
    "command, against the dataSha256 the job recorded; a job without one is SKIP); tfrecord (each job whose "
    "dataPath names TFRecord files: every record's length and masked CRC-32C, checked by the node's agent, with "
    "the first bad offset per file); nccl (a signed nccl_probe "
    "on the node: its peak all-reduce bus bandwidth >= --min-busbw GB/s, the unit nccl-tests prints); rdma (a "
    "short ib_write_lat run between two nodes of each job spanning nodes, typical latency <= --max-rdma-latency "
    "us; SKIP where ib_write_lat is not installed).\n\n"
    "The leader runs it (a standby redirects); it waits for the agents up to --timeout. A node that is not "
    "Ready, or does not answer in time, FAILs: an unchecked node is not a ready one.\n\n"
    "Exit codes: 0 every check passed or was skipped (with --strict: passed); 1 a check failed, or no "
    "coordinator answered; 2 bad input (an unknown node, a bad option, another pre-flight running)."
)


Check = enum.StrEnum("Check", [(c, c) for c in CHECKS])  # the component's check names, as typer's choices


def request_body(
    nodes: list[str],
    skip: list[Check],
    only: list[Check],
    min_busbw: float,
    min_free_memory: float,
    min_driver: str,
    timeout: float | None,
    min_cuda: str | None = None,
    min_cudnn: str | None = None,
    max_rdma_latency: float | None = None,
) -> PreflightRequest:
    """The API request for these options (what is not given is left to the coordinator's defaults)."""
    if skip and only:
        fail("--skip and --only: give one of them (--only names the checks to run, --skip the ones not to)")
    chosen = [c.value for c in (only or Check) if c not in skip]
    if not chosen:
        fail(f"--skip: every check is skipped ({', '.join(c.value for c in skip)}); leave at least one to run")
    body: dict[str, object] = {
        "checks": chosen,
        "min_busbw_gbps": min_busbw,
        "min_free_memory_pct": min_free_memory,
        "min_driver": min_driver,
    }
    if nodes:
        body["nodes"] = list(dict.fromkeys(nodes))
    if timeout is not None:
        body["timeout_s"] = timeout
    for key, value in (("min_cuda", min_cuda), ("min_cudnn", min_cudnn), ("max_rdma_latency_us", max_rdma_latency)):
        if value is not None:
            body[key] = value
    try:
        return msgspec.convert(body, PreflightRequest)
    except msgspec.ValidationError as exc:
        fail(f"{exc}; nothing was sent")


def _short(cell: str | None) -> str:
    """A digest cut to its first 12 digits (the reason keeps it whole, and -o json every field)."""
    return _DIGEST.sub(lambda m: m[0][:12] + "…", cell) if cell else "-"


def render_report(report: PreflightReport, console: Console, via: str | None) -> None:
    rows = []
    for r in report.results:
        check = r.check if r.subject is None or r.check == "memory" else f"{r.check} {r.subject}"
        verdict = Text(r.verdict, style=VERDICT_STYLES[r.verdict])
        rows.append([r.node_id, check, _short(r.value), _short(r.threshold), verdict, r.reason])
    render.table(console, ["NODE", "CHECK", "VALUE", "THRESHOLD", "RESULT", "REASON"], rows)
    style = "bold green" if report.ok else "bold red"
    word = "ready" if report.ok else "NOT ready"
    t = report.thresholds
    console.print(
        f"[{style}]{word}[/]: {report.passed} passed, {report.failed} failed, {report.skipped} skipped on "
        f"{len(report.nodes)} node(s) in {report.finished - report.started:.1f} s",
    )
    said = {
        "driver": f"driver >= {t.min_driver}",
        "memory": f">= {t.min_free_memory_pct:g}% GPU memory free",
        "cuda": f"CUDA {'>= ' + t.min_cuda if t.min_cuda else 'as the driver allows'}"
        + (f", cuDNN >= {t.min_cudnn}" if t.min_cudnn else ""),
        "data": "data as each job recorded",
        "tfrecord": "TFRecord records intact",
        "nccl": f"busbw >= {t.min_busbw_gbps:g} GB/s",
        "rdma": f"RDMA latency <= {t.max_rdma_latency_us:g} us",
    }
    console.print(
        escape(
            f"checked: {', '.join(said[c] for c in report.checks)}; agents' answers within {t.timeout_s:g} s; "
            f"run by {report.by} (epoch {report.epoch}) via {via}"
        ),
        style="dim",
    )


def preflight(
    nodes: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="NODE...",
            help="Nodes to check, as `myoloctl get nodes` lists them (default: every Ready node).",
            show_default=False,
        ),
    ] = None,
    min_busbw: Annotated[
        float, typer.Option("--min-busbw", min=0, help="Least all-reduce bus bandwidth, GB/s (nccl-tests' busbw).")
    ] = 10.0,
    min_free_memory: Annotated[
        float, typer.Option("--min-free-memory", min=0, max=100, help="Least free memory on every GPU, in %.")
    ] = 10.0,
    min_driver: Annotated[
        str, typer.Option("--min-driver", help="Oldest GPU driver accepted (515.65.01: CUDA 11.7).")
    ] = DEFAULT_MIN_DRIVER,
    skip: Annotated[
        list[Check] | None,
        typer.Option("--skip", help=f"A check not to run (repeatable): {', '.join(CHECKS)}."),
    ] = None,
    only: Annotated[
        list[Check] | None, typer.Option("--only", help="Run only this check (repeatable).", show_default=False)
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=1,
            max=MAX_TIMEOUT_S,
            help="Seconds to wait for the agents' answers (default: the coordinator's preflight.timeout_s, 120 s).",
            show_default=False,
        ),
    ] = None,
    min_cuda: Annotated[
        str | None, typer.Option("--min-cuda", help="Oldest CUDA the trainer's torch may be built for (e.g. 12.1).")
    ] = None,
    min_cudnn: Annotated[str | None, typer.Option("--min-cudnn", help="Oldest cuDNN accepted (e.g. 8.9).")] = None,
    max_rdma_latency: Annotated[
        float | None,
        typer.Option("--max-rdma-latency", min=0, help="Highest typical ib_write_lat latency, us (default 10)."),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when a check was skipped, too.")] = False,
    output: OutputOption = Output.table,
    api: ApiOption = None,
) -> None:
    """Run the pre-upgrade checklist on NODE... (see HELP, which main.py registers as this command's help)."""
    request = request_body(
        nodes or [],
        skip or [],
        only or [],
        min_busbw,
        min_free_memory,
        min_driver,
        timeout,
        min_cuda,
        min_cudnn,
        max_rdma_latency,
    )
    client = ApiClient.from_option(api)
    client.timeout = (timeout or MAX_TIMEOUT_S) + ANSWER_MARGIN_S  # the answer comes when the agents' do
    report = client.preflight(request)
    print_body(report, output, lambda console: render_report(report, console, client.last_url))
    if not report.ok or (strict and report.skipped):
        raise typer.Exit(FAILED)
