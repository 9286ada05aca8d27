"""``myoloctl plan bandwidth|metadata``: the hybrid-cloud migration sums, done right and explained.

Nothing is sent anywhere: these are calculators for planning a move to (or from) the cloud. The figures come
from ``coordinator/planning/migration.py``; this module reads the options and prints them (or ``-o json``).
"""

from __future__ import annotations

import json
from typing import Annotated

import msgspec
import typer
import yaml
from rich.console import Console

from myolo.coordinator.cli.exits import fail
from myolo.coordinator.cli.output import Output, OutputOption
from myolo.coordinator.planning.migration import (
    BandwidthPlan,
    MetadataPlan,
    PlanInputError,
    bandwidth,
    metadata_memory,
    parse_count,
    parse_duration_s,
    parse_rate_bps,
    parse_size,
)

app = typer.Typer(
    help="Plan a data migration: the bandwidth a volume needs in a given time, and the memory the storage "
    "layer's metadata engine needs for a number of files. Calculators only: nothing is sent.",
    no_args_is_help=True,
)

BANDWIDTH_HELP = (
    "Bandwidth to move --size in --hours: Mbps = GB x 8000 / (hours x 3600).\n\n"
    "A common shortcut, `Mbps = GB x 8 / hours / 3600`, is off by a factor of 1000: GB x 8 is gigabits, so "
    "that formula gives Gbps. Example: 50 TB in 24 h needs 4,629.6 Mbps (4.63 Gbps), not 4.63 Mbps.\n\n"
    "Sizes are bytes, in decimal units (KB, MB, GB, TB, PB = 10^3 ... 10^15) or binary ones (KiB ... PiB = "
    "2^10 ... 2^50); rates are decimal bits per second, as links are sold (10Gbps = 10^10 bit/s).\n\n"
    "With --link it also prints how long that link takes, and whether it meets --hours. --efficiency is the "
    "share of the link the transfer really gets (protocol overhead, other traffic): the link to provision is "
    "the rate divided by it."
)

METADATA_HELP = (
    "Memory of the metadata engine (JuiceFS) for --files files: GB = files x 1 KB / 1,000,000.\n\n"
    "This is the usual rule of thumb (about 1 KB of metadata-engine memory per file), not a measurement of any "
    "engine: change --bytes-per-file when you have measured yours. GB is decimal (10^9 bytes); GiB is printed "
    "too."
)

SizeOption = Annotated[
    str,
    typer.Option(
        "--size", "-s", help="Volume to move: 50TB, 500GiB, 1.5PB (decimal TB = 10^12 B; binary TiB = 2^40 B)."
    ),
]
HoursOption = Annotated[
    str | None,
    typer.Option(
        "--hours",
        "-t",
        help="Time allowed: hours (24, 1.5) or a duration (24h, 90m, 2d, 1h30m). Optional with --link.",
        show_default=False,
    ),
]
LinkOption = Annotated[
    str | None,
    typer.Option(
        "--link", help="A link to judge: 10Gbps, 400Mbps, 1Gbit/s (bits) or 1.25GB/s (bytes).", show_default=False
    ),
]
EfficiencyOption = Annotated[
    float,
    typer.Option(
        "--efficiency",
        "-e",
        help="Share of the link the transfer gets, in (0, 1]; 1.0 is the bare formula, WAN copies often get "
        "0.7 to 0.8.",
    ),
]


def _print_data(plan: msgspec.Struct, output: Output) -> None:
    """``-o json`` or ``-o yaml``: every figure of the plan, unrounded."""
    body = msgspec.to_builtins(plan)
    text = json.dumps(body, indent=2) if output is Output.json else yaml.safe_dump(body, sort_keys=False).rstrip()
    Console(soft_wrap=True, highlight=False).out(text, highlight=False)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:,.1f} s"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:,.2f} h"
    return f"{seconds / 86_400:,.2f} days"


def _bytes(size_bytes: int) -> str:
    return f"{size_bytes:,} bytes"


def render_bandwidth(plan: BandwidthPlan, out: Console) -> None:
    units = "decimal, 10^3 steps" if plan.size.units == "decimal" else "binary, 2^10 steps"
    out.print(f"volume     {plan.size.given} = {_bytes(plan.size.bytes)} ({units}) = {plan.size.bytes / 1e9:,.3f} GB")
    if plan.mbps is not None and plan.seconds is not None and plan.gbps is not None:
        out.print(f"time       {_duration(plan.seconds)} ({plan.seconds:,.0f} s)")
        out.print(f"[bold]needed     {plan.mbps:,.1f} Mbps = {plan.gbps:,.3f} Gbps[/]  ({plan.formula})")
        if plan.efficiency < 1 and plan.provision_mbps is not None and plan.provision_gbps is not None:
            out.print(
                f"provision  {plan.provision_mbps:,.1f} Mbps = {plan.provision_gbps:,.3f} Gbps of link at "
                f"{plan.efficiency:.0%} efficiency"
            )
        out.print(
            f"note       the usual `Mbps = GB x 8 / hours / 3600` would print {plan.seed_formula_value:,.3f}: "
            "off by a factor of 1000 (GB x 8 is gigabits, so that figure is Gbps)",
            style="dim",
        )
    if plan.link is not None:
        link = plan.link
        verdict = ""
        if link.meets_deadline is not None and plan.seconds is not None:
            verdict = (
                ": [green]within[/] the time allowed"
                if link.meets_deadline
                else f": [red]over[/] the time allowed by {_duration(link.seconds - plan.seconds)}"
            )
        out.print(
            f"link       {link.given} at {plan.efficiency:.0%} = {link.effective_bps / 1e6:,.1f} Mbps effective: "
            f"takes {_duration(link.seconds)}{verdict}"
        )


def render_metadata(plan: MetadataPlan, out: Console) -> None:
    out.print(f"files      {plan.files:,}")
    out.print(f"per file   {plan.bytes_per_file.given} = {_bytes(plan.bytes_per_file.bytes)}")
    out.print(f"[bold]memory     {plan.gb:,.3f} GB[/] ({plan.gib:,.3f} GiB, {_bytes(plan.bytes)})")
    out.print(f"rule       {plan.rule}", style="dim")


@app.command("bandwidth", help=BANDWIDTH_HELP)
def bandwidth_cmd(
    size: SizeOption,
    hours: HoursOption = None,
    link: LinkOption = None,
    efficiency: EfficiencyOption = 1.0,
    output: OutputOption = Output.table,
) -> None:
    if hours is None and link is None:
        fail("--hours: give the time allowed (e.g. --hours 24), or a --link to see how long it takes")
    try:
        plan = bandwidth(
            parse_size(size),
            parse_duration_s(hours) if hours is not None else None,
            efficiency,
            parse_rate_bps(link) if link is not None else None,
            link or "",
        )
    except PlanInputError as exc:
        fail(str(exc))
    if output is Output.table:
        render_bandwidth(plan, Console(soft_wrap=True, highlight=False))
    else:
        _print_data(plan, output)


@app.command("metadata", help=METADATA_HELP)
def metadata_cmd(
    files: Annotated[str, typer.Option("--files", "-n", help="Number of files: 250000000, 250M, 2.5e8, 1B.")],
    bytes_per_file: Annotated[
        str, typer.Option("--bytes-per-file", help="Metadata memory per file (the usual rule: 1KB).")
    ] = "1KB",
    output: OutputOption = Output.table,
) -> None:
    try:
        plan = metadata_memory(parse_count(files), parse_size(bytes_per_file, "--bytes-per-file"))
    except PlanInputError as exc:
        fail(str(exc))
    if output is Output.table:
        render_metadata(plan, Console(soft_wrap=True, highlight=False))
    else:
        _print_data(plan, output)
