"""``myoloctl profile start``: a flame graph of one worker of a job, taken by py-spy on its node.

The leader sends the node's agent a signed ``profile`` command; this command then follows the profile on the
agent's endpoint (as ``logs`` reads logs there), shows how far it is, fetches the folded stacks when it is
done and writes them as a self-contained HTML flame graph, speedscope JSON, or the folded text itself.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from myolo.coordinator.cli.client import AgentClient, ApiClient, ApiOption
from myolo.coordinator.cli.exits import FAILED, fail
from myolo.coordinator.core.errors import Refusal
from myolo.coordinator.jobs.profile import ProfileRequest
from myolo.coordinator.profiling.flamegraph import ProfileError, flamegraph_html, speedscope
from myolo.events.payloads.commands import MAX_PROFILE_S

app = typer.Typer(
    help="Profile a job's worker on demand (py-spy on its node) into a flame graph.", no_args_is_help=True
)
MAX_FOLDED_BYTES = 64 << 20
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$")


def parse_duration(text: str) -> float:
    """``30``, ``30s``, ``5m``, ``0.5h`` -> seconds; ValueError naming the forms it takes."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a duration: write 30, 30s, 5m or 1h")
    return float(m.group(1)) * {"h": 3600, "m": 60, "min": 60}.get(m.group(2) or "s", 1)


@app.command("start")
def start(
    job: Annotated[str, typer.Option("--job", "-j", help="The job's name, as `myoloctl get jobs` lists it.")],
    rank: Annotated[int, typer.Option("--rank", "-r", min=0, help="Global rank of the worker to profile.")] = 0,
    duration: Annotated[
        str, typer.Option("--duration", "-d", help=f"How long to sample: 30s, 5m (at most {MAX_PROFILE_S:g} s).")
    ] = "30s",
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the result.")] = Path(
        "flamegraph.html"
    ),
    fmt: Annotated[
        Literal["html", "speedscope", "folded"],
        typer.Option(
            "--format",
            help="html: a self-contained flame graph page; speedscope: JSON for speedscope.app; folded: "
            "'frame;frame count' lines (flamegraph.pl, inferno).",
        ),
    ] = "html",
    rate: Annotated[int, typer.Option("--rate", min=1, max=1000, help="Samples a second.")] = 100,
    native: Annotated[bool, typer.Option("--native", help="C/C++ frames too (slower to sample).")] = False,
    api: ApiOption = None,
) -> None:
    """Sample one worker's stacks for --duration with py-spy on its node, then write the flame graph.

    The coordinator asks the node's agent (a signed command); the agent needs py-spy and ptrace rights over
    its workers (it says how to grant them when it has none). Exit 0 once the file is written, 1 when the
    profile failed, 2 for a bad request.
    """
    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        fail(f"--duration: {exc}")
    if not 0 < seconds <= MAX_PROFILE_S:
        fail(f"--duration: {seconds:g} s is outside 0..{MAX_PROFILE_S:g} s")
    out = Console(stderr=True, highlight=False)
    request = ProfileRequest(rank=rank, duration_s=seconds, rate_hz=rate, native=native)
    started = ApiClient.from_option(api).profile(job, request)
    if not started.agent_url:
        fail(f"node {started.node_id} does not say where its agent's endpoint is (no health_url)", FAILED)
    agent = AgentClient([started.agent_url.rstrip("/")], timeout=10.0)
    pid = started.profile_id
    where = f"rank {rank} of job {job} (generation {started.generation}) on {started.node_id}"
    rec = _follow(agent, pid, where, seconds, out)
    if rec["state"] == "failed":
        fail(f"the profile of {where} failed: {rec.get('error')}", 1)
    try:
        folded = agent.folded(pid, MAX_FOLDED_BYTES).decode(errors="replace")
    except Refusal as exc:
        fail(f"the agent of {started.node_id}: {exc.render()}", FAILED)
    title = f"{job} rank {rank}, generation {started.generation}, {rec['seconds']:g} s at {rate} Hz"
    try:
        text = (
            flamegraph_html(folded, title)
            if fmt == "html"
            else json.dumps(speedscope(folded, title))
            if fmt == "speedscope"
            else folded
        )
    except ProfileError as exc:
        fail(f"the agent's profile does not read: {exc}", 1)
    output.write_text(text)
    note = f"; the worker exited after {rec['seconds']:g} s, the profile covers that" if rec.get("ended_early") else ""
    out.print(f"{rec['samples']} samples of {where} -> {output}{note}")


def _follow(agent: AgentClient, profile_id: str, where: str, seconds: float, out: Console) -> dict:
    """Poll the agent until the profile ended (its state ``done`` or ``failed``), showing how far it is."""
    deadline = time.monotonic() + seconds + 60
    with out.status(f"profiling {where}...") as status:
        while True:
            try:
                rec = agent.profile(profile_id)
            except Refusal as exc:
                fail(f"the agent at {agent.urls[0]}: {exc.render()}", 1)
            if rec.get("state") in ("done", "failed"):
                return rec
            elapsed = time.time() - float(rec.get("started", time.time()))
            status.update(f"profiling {where}: {min(elapsed, seconds):.0f}/{seconds:g} s")
            if time.monotonic() > deadline:
                fail(f"the profile of {where} has not ended {seconds + 60:g} s after it started", 1)
            time.sleep(1.0)  # the profile runs on the node's wall clock; poll it as a person would
