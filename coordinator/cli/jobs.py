"""``myoloctl apply | scale job | delete job | logs job``: an elastic job's life from the command line.

``apply`` checks the manifest here with the coordinator's own parser first, so a mistake is named with its
field (``spec.maxReplicas: must be >= minReplicas (1)``) and exits 2 before anything is sent. Writes may
reach any coordinator: a standby redirects them to the leader. ``logs job`` asks the coordinator where a rank
runs (the job's generation, then that node's agent endpoint) and reads the log from the agent itself.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from myolo.coordinator.cli.client import AgentClient, ApiClient, ApiOption
from myolo.coordinator.cli.exits import FAILED, fail
from myolo.coordinator.core.errors import Refusal
from myolo.coordinator.jobs.manifest import MAX_MANIFEST_BYTES, ManifestError, parse_manifest

JobArg = Annotated[str, typer.Argument(help="Job name (metadata.name), as `myoloctl get jobs` lists it.")]

scale_app = typer.Typer(help="Change how many replicas a job runs.", no_args_is_help=True)
delete_app = typer.Typer(help="Delete a job.", no_args_is_help=True)
logs_app = typer.Typer(help="Print a job's worker logs (read from the agents).", no_args_is_help=True)


def _out() -> Console:
    return Console(soft_wrap=True, highlight=False)


def read_manifest(filename: str) -> bytes:
    """The file's bytes (``-``: stdin), at most the manifest limit; a problem exits 2 naming ``-f``."""
    try:
        if filename == "-":
            raw = typer.get_binary_stream("stdin").read(MAX_MANIFEST_BYTES + 1)
        else:
            with open(filename, "rb") as f:
                raw = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        fail(f"-f {filename}: cannot read it: {exc.strerror or exc}", code=2)
    if len(raw) > MAX_MANIFEST_BYTES:
        fail(f"-f {filename}: the manifest is over {MAX_MANIFEST_BYTES} bytes (the limit); nothing was sent", code=2)
    return raw


def apply(
    filename: Annotated[
        str, typer.Option("--filename", "-f", help="The ElasticJob manifest (YAML); '-' reads it from stdin.")
    ],
    api: ApiOption = None,
) -> None:
    """Create an elastic job from a manifest, or update an existing one's replica bounds and policies.

    The manifest is checked here before anything is sent: an error names the field and exits 2.
    A change a running job cannot take (another model, say) is refused naming the field: delete the job, apply again.
    """
    raw = read_manifest(filename)
    try:
        parse_manifest(raw)
        text = raw.decode("utf-8")
    except ManifestError as exc:
        fail(f"{exc} (in {'stdin' if filename == '-' else filename}; nothing was sent)", code=2)
    except UnicodeDecodeError as exc:
        fail(f"-f {filename}: the manifest is not UTF-8 ({exc}); nothing was sent", code=2)
    submit(text, api)


def submit(text: str, api: str | None) -> None:
    """Send a checked manifest to the leader; print what became of the job."""
    client = ApiClient.from_option(api)
    job = client.apply(text)
    verb = "created" if client.last_status == 201 else "configured"
    _out().print(f"job/{escape(job.name)} [bold]{verb}[/] via {client.last_url}")


@scale_app.command("job")
def scale_job(
    name: JobArg,
    replicas: Annotated[
        int, typer.Option("--replicas", min=0, help="Replicas to run, within spec.minReplicas..spec.maxReplicas.")
    ],
    api: ApiOption = None,
) -> None:
    """Pin the job at --replicas, within the manifest's minReplicas..maxReplicas.

    The job resizes when the capacity is there: a new generation, resumed from its checkpoint.
    """
    client = ApiClient.from_option(api)
    job = client.scale(name, replicas)
    now = job.generation.replicas if job.generation else 0
    _out().print(
        f"job/{name} [bold]scaled[/] to {replicas} replicas (running {now} now, {job.phase}) via {client.last_url}"
    )


@delete_app.command("job")
def delete_job(name: JobArg, api: ApiOption = None) -> None:
    """Delete the job: its workers stop with a checkpoint, then the job is gone from `get jobs`."""
    ApiClient.from_option(api).delete_job(name)
    _out().print(f"job/{name} [bold]deleting[/]: its workers stop with a checkpoint, then it is removed")


@logs_app.command("job")
def logs_job(
    name: JobArg,
    rank: Annotated[int, typer.Option("--rank", "-r", min=0, help="Global rank of the worker (0 is the first).")] = 0,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing as the worker writes, until it ends or Ctrl-C.")
    ] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.01, help="Seconds between polls with --follow.")] = 0.5,
    api: ApiOption = None,
) -> None:
    """Print the log of one worker of the job's current generation, read from the agent of its node.

    Global rank = node rank x workers per node + the worker's index on its node.
    `myoloctl describe job NAME` lists each node's ranks.
    """
    client = ApiClient.from_option(api)
    job = client.job(name)
    gen = job.generation
    if gen is None:
        fail(f"job {name} has no generation yet ({job.phase}: {job.reason or 'not placed'}): no worker, no log", 1)
    if rank >= gen.world_size:
        fail(f"--rank {rank}: generation {gen.number} of job {name} has ranks 0..{gen.world_size - 1}", 2)
    node_rank = rank // gen.workers_per_node
    member = next((m for m in gen.members if m.node_rank == node_rank), None)
    if member is None:
        fail(f"generation {gen.number} of job {name} lists no node of node rank {node_rank} (rank {rank}); retry", 1)
    url = client.node(member.node_id).get("health_url")
    if not url:
        fail(
            f"node {member.node_id} (rank {rank}) does not say where its agent's HTTP endpoint is (no health_url "
            "in `myoloctl describe node`): the agent is older than this myoloctl, or runs without a health port",
            FAILED,
        )
    _stream(AgentClient([url.rstrip("/")]), name, gen.number, rank, member.node_id, follow, interval)


def _stream(agent: AgentClient, job: str, generation: int, rank: int, node: str, follow: bool, interval: float) -> None:
    """From offset 0: every chunk the agent has; with ``follow``, polling for more until ``eof`` or Ctrl-C."""
    offset, end = 0, None
    try:
        while True:
            try:
                chunk = agent.logs(job, rank, generation, offset)
            except Refusal as exc:  # the agent's, not the coordinators': what it says, and exit 1 whatever it is
                where = f"the agent of node {node} at {agent.urls[0]}"
                fail(f"{where}: {exc.render()}" if exc.status is not None else f"{where} does not answer", 1)
            typer.echo(chunk.text, nl=False)
            end = chunk.size if end is None else end
            if chunk.eof:
                return
            stalled = chunk.next_offset <= offset
            offset = chunk.next_offset
            if not follow and (stalled or offset >= end):
                return
            if stalled:
                time.sleep(interval)
    except KeyboardInterrupt:
        return
