"""``myoloctl describe node|job NAME``: one node or job in full, for a person deciding what to do about it.

A node: GPUs with their health and reasons, the recent faults, what NCCL communicators on the node look like,
the memory-leak trend of each tracked series, the cordon and why. A job: its phase and why, the generation
that runs (nodes, ranks, GPUs, rendezvous, the step it resumed from), progress, restarts, policies, and the
decisions taken with the measurements behind them. Readable piped (plain) or on a terminal.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from myolo.coordinator.cli import render
from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.render import Cell, age, reasons, styled
from myolo.coordinator.jobs.answers import JobAnswer
from myolo.coordinator.jobs.records import Generation
from myolo.events.payloads.trainer_job import CUBLAS_WORKSPACE_CONFIG

app = typer.Typer(help="Show one node or job in full.", no_args_is_help=True)


@app.command("node")
def describe_node(
    name: Annotated[str, typer.Argument(help="Node id, as `myoloctl get nodes` lists it.")],
    api: ApiOption = None,
) -> None:
    """GPUs, health and reasons, recent faults, NCCL facts, leak trend and cordon of one node."""
    node = ApiClient.from_option(api).node(name)
    print_node(Console(soft_wrap=True, highlight=False), node)


@app.command("job")
def describe_job(
    name: Annotated[str, typer.Argument(help="Job name, as `myoloctl get jobs` lists it.")],
    api: ApiOption = None,
) -> None:
    """Phase and why, generation (nodes, ranks, GPUs, rendezvous), progress, restarts, policies, decisions.

    Every decision is listed with its reason and the metric values behind it, newest last.
    """
    job = ApiClient.from_option(api).job(name)
    print_job(Console(soft_wrap=True, highlight=False), job)


def _now(node: dict[str, Any]) -> float:
    """The coordinator's clock at the time of the answer (ages must be on its clock, not ours)."""
    if node.get("last_seen") is not None and node.get("last_seen_age_s") is not None:
        return node["last_seen"] + node["last_seen_age_s"]
    return time.time()


def _field(console: Console, key: str, value: Cell, indent: int = 0) -> None:
    line = Text(" " * indent + f"{key + ':':<14}")
    line.append(value if isinstance(value, Text) else Text(value))
    console.print(line)


def _section(console: Console, title: str) -> None:
    console.print()
    console.print(Text(title, style="bold"))


def print_node(console: Console, node: dict[str, Any]) -> None:
    now = _now(node)
    _field(console, "Name", node["node_id"])
    seen = f"last sample {age(node.get('last_seen_age_s'))} ago, seq {node.get('last_seq')}, every {node.get('sample_interval_s')}s"
    _field(console, "Status", render.node_status(node).append(f"  ({seen})"))
    _field(console, "Health", styled(node["health"]))
    for why in node.get("health_reasons", []):
        console.print(Text(" " * 14 + why))
    cordon = node.get("cordon")
    if cordon:
        state = "cordoned" if cordon["cordoned"] else "uncordoned"
        text = f"{state} {render.since(now, cordon['time'])} ago by {cordon['by']} (epoch {cordon.get('epoch', 0)}): {cordon['reason']}"
        _field(console, "Cordon", styled(text, "magenta" if cordon["cordoned"] else ""))
    else:
        _field(console, "Cordon", "not cordoned")
    _field(console, "Schedulable", "yes" if node.get("schedulable") else styled("no", "yellow"))
    backend = node.get("backend") or "-"
    _field(console, "Backend", backend + (" (simulated GPUs)" if backend == "sim" else ""))
    _field(console, "Agent", f"{node.get('agent_version') or '-'}   driver {node.get('driver_version') or '-'}")

    _section(console, f"GPUs ({len(node.get('gpus', []))}):")
    render.table(
        console,
        ("GPU", "NAME", "UTIL", "MEMORY", "TEMP", "POWER", "HEALTH", "REASONS"),
        [render.gpu_cells(g, reasons_limit=80) for g in node.get("gpus", [])],
        indent=2,
    )

    _section(console, "Recent faults (newest last):")
    faults = node.get("recent_faults", [])
    if faults:
        render.table(
            console,
            ("AGE", "KIND", "HEALTH", "GPU", "XID", "REASONS"),
            [
                [
                    render.since(now, f["time"]),
                    f["kind"],
                    styled(f["health"]),
                    _opt(f.get("gpu_index")),
                    _opt(f.get("xid")),
                    reasons(f.get("reasons") or ([f["message"]] if f.get("message") else []), 80),
                ]
                for f in faults
            ],
            indent=2,
        )
    else:
        console.print("  none")

    _section(console, "NCCL communicators:")
    nccl = node.get("nccl", [])
    if nccl:
        render.table(
            console,
            ("PID", "RANK", "NODES", "VERSION", "NETWORK", "TRANSPORTS", "INIT", "WARNINGS"),
            [
                [
                    str(c["pid"]),
                    f"{_opt(c.get('rank'))}/{_opt(c.get('nranks'))}",
                    _opt(c.get("nnodes")),
                    c.get("version") or "-",
                    c.get("network") or "-",
                    ",".join(c.get("transports", [])) or "-",
                    "done" if c.get("init_complete") else styled("pending", "yellow"),
                    styled(reasons(c.get("warnings", [])), "yellow") if c.get("warnings") else "-",
                ]
                for c in nccl
            ],
            indent=2,
        )
    else:
        console.print("  none reported (no NCCL job has run here yet)")

    _section(console, "Memory leak trend (Theil-Sen slope, % of capacity per hour):")
    leaks = node.get("leaks", [])
    if leaks:
        render.table(
            console,
            ("SERIES", "SLOPE", "RANGE", "WINDOW", "SAMPLES", "ALERT"),
            [
                [
                    _series(s),
                    f"{s['slope_pct_per_h']:+.3f}%/h",
                    f"{s['lower_pct_per_h']:+.3f}..{s['upper_pct_per_h']:+.3f}",
                    age(s.get("window_s")),
                    str(s.get("samples", "-")),
                    styled("LEAK", "bold red") if s.get("alert") else "no",
                ]
                for s in leaks
            ],
            indent=2,
        )
    else:
        console.print("  no series reported yet")

    flags = node.get("flags", [])
    if flags:
        _section(console, "Rejected records (implausible, newest last):")
        for flag in flags:
            console.print(Text(f"  {flag}", style="yellow"))


def _opt(value: Any) -> str:
    return "-" if value is None else str(value)


def _series(leak: dict[str, Any]) -> str:
    subject = leak.get("subject", "?")
    if subject == "gpu":
        return f"gpu {leak.get('gpu_index')}"
    if subject == "process_gpu":
        return f"pid {leak.get('pid')} on gpu {leak.get('gpu_index')}"
    return f"pid {leak.get('pid')} host RSS"


def _clock(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def runtime_line(deterministic: bool) -> str:
    """``spec.runtime`` in words: what the workers run with, and how to change it."""
    if deterministic:
        return (
            f"deterministic (deterministic kernels, CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE_CONFIG}, seeded data order "
            "and dropout; "
            "spec.runtime.deterministic: false for the fastest kernels)"
        )
    return "fast (cudnn.benchmark picks the fastest kernels; results may differ in the last bits between runs)"


def print_job(console: Console, job: JobAnswer) -> None:
    spec, trainer = job.spec, job.spec.trainer
    _field(console, "Name", job.name)
    phase = render.job_phase(job)
    _field(console, "Phase", phase.append(f"  ({job.reason})") if job.reason else phase)
    pinned = f"; pinned at {job.desired_replicas} by scale" if job.desired_replicas is not None else ""
    now = job.generation.replicas if job.generation else 0
    _field(console, "Replicas", f"{now} (min {spec.min_replicas}, max {spec.max_replicas}{pinned})")
    _field(console, "Replica", f"tp {spec.tp} x pp {spec.pp} = {spec.gpus_per_replica} GPU(s)")
    _field(
        console,
        "Trainer",
        f"{trainer.model.name}, {trainer.optimizer.steps} steps, global batch {trainer.data.global_batch}, "
        f"seq len {trainer.data.seq_len}, seed {trainer.runtime.seed}",
    )
    _field(console, "Runtime", runtime_line(trainer.runtime.deterministic))
    where = trainer.checkpoint.dir or "none (host-memory snapshots only)"
    _field(
        console,
        "Checkpoints",
        f"{where}; every {trainer.checkpoint.every} steps, snapshot every {trainer.checkpoint.snapshot_every}",
    )
    failures = ", ".join(f"{n} {c} in a row" for n, c in sorted(job.node_failures.items()))
    _field(
        console, "Restarts", f"{job.restarts} of {spec.max_restarts}" + (f" (failures: {failures})" if failures else "")
    )
    if job.not_before is not None:
        _field(console, "Back-off", f"no new generation before {_clock(job.not_before)}")
    _field(console, "Created", f"{_clock(job.created)}, updated {_clock(job.updated)}")

    if job.previous is not None:
        _section(console, f"Stopping generation {job.previous.number} ({job.previous.stage}):")
        _print_generation(console, job.previous)
    _section(
        console, f"Generation {job.generation.number} ({job.generation.stage}):" if job.generation else "Generation:"
    )
    if job.generation is not None:
        _print_generation(console, job.generation)
    else:
        console.print("  none yet (the job waits for capacity)")

    _section(console, "Progress:")
    p = job.progress
    console.print(
        f"  step {p.step}/{trainer.optimizer.steps}   loss {render.num(p.loss, digits=4)}   tokens/s "
        f"{render.num(p.tokens_per_s)}   step time {render.num(p.step_time_s, 's', 3)}   staleness "
        f"{_opt(p.gradient_staleness)}   updated {_clock(p.updated)}"
    )

    _print_nccl(console, job)

    _section(console, "Policies:")
    if spec.policies:
        render.table(
            console,
            ("METRIC", "THRESHOLD", "ACTION", "WINDOW", "COOLDOWN"),
            [
                [
                    p.metric,
                    f"{p.threshold:g}" + ("%" if p.metric == "gpu_util" else ""),
                    p.action,
                    age(p.window_s),
                    age(p.cooldown_s),
                ]
                for p in spec.policies
            ],
            indent=2,
        )
    else:
        console.print("  none (the job grows to maxReplicas as capacity allows, shrinks on faults)")

    _section(console, "Decisions (newest last):")
    if job.decisions:
        render.table(
            console,
            ("TIME", "KIND", "GEN", "REPLICAS", "BY", "REASON", "METRICS"),
            [
                [
                    time.strftime("%H:%M:%S", time.localtime(d.time)),
                    d.kind,
                    _opt(d.generation),
                    _opt(d.replicas),
                    d.by,
                    d.reason,
                    " ".join(f"{k}={v:g}" for k, v in sorted(d.metrics.items())) or "-",
                ]
                for d in job.decisions
            ],
            indent=2,
        )
    else:
        console.print("  none yet")


def _print_nccl(console: Console, job: JobAnswer) -> None:
    """What NCCL chose for the running generation, from its workers' logs, and the bandwidth it gets."""
    n = job.nccl
    if n is None:
        return
    _section(console, f"NCCL (generation {n.generation}, algorithm {n.algo}):")
    if not n.ranks_reported:
        console.print(
            f"  no rank's NCCL log has shown its communicator yet (0 of {n.world_size}); on CPU the job uses gloo"
        )
    else:
        _field(
            console, "Reported", f"{n.ranks_reported} of {n.world_size} ranks; NCCL {', '.join(n.versions) or '?'}", 2
        )
        told = ", ".join(n.algo_seen) or "none (NCCL chose per call)"
        _field(console, "NCCL_ALGO", f"{told}, as the ranks' NCCL read it", 2)
        _field(console, "Network", ", ".join(n.networks) or "-", 2)
        _field(console, "Transports", ", ".join(n.transports) or "-", 2)
        _field(console, "Channels", ", ".join(map(str, n.coll_channels)) or "-", 2)
        _field(console, "Rings", "; ".join(n.rings) or "-", 2)
        _field(console, "Trees", "; ".join(n.trees) or "-", 2)
        for warning in n.warnings:
            _field(console, "Warning", warning, 2)
    probes = ", ".join(f"{node} {v:.2f}" for node, v in sorted(n.probe_busbw_gbps.items())) or "none yet"
    own = render.num(n.allreduce_busbw_gbps, " GB/s", 2) if n.allreduce_busbw_gbps is not None else "not measured yet"
    _field(console, "All-reduce", f"busbw {own} (the job's own, after its first step); nodes' last probes: {probes}", 2)


def _print_generation(console: Console, gen: Generation) -> None:
    nodes = len(gen.members)
    per_node = f"{gen.workers_per_node} worker(s) per node on {nodes} node(s)"
    _field(console, "Replicas", f"{gen.replicas}, world size {gen.world_size} ({per_node})", 2)
    _field(console, "Rendezvous", f"{gen.master_addr}:{gen.master_port}", 2)
    resumed = "the start" if gen.resumed_from is None else f"step {gen.resumed_from}"
    _field(console, "Resumed", resumed, 2)
    _field(console, "Cause", gen.cause or "-", 2)
    _field(console, "Started", f"{_clock(gen.started)}, first step {_clock(gen.first_step_at)}", 2)
    render.table(
        console,
        ("NODE", "NODE RANK", "RANKS", "GPUS"),
        [
            [
                m.node_id,
                str(m.node_rank),
                _ranks(m.node_rank, gen.workers_per_node),
                ",".join(str(g) for g in m.gpus),
            ]
            for m in sorted(gen.members, key=lambda m: m.node_rank)
        ],
        indent=2,
    )


def _ranks(node_rank: int, per_node: int) -> str:
    """The global ranks of a node's workers (``myoloctl logs job --rank`` takes them)."""
    first = node_rank * per_node
    return str(first) if per_node == 1 else f"{first}-{first + per_node - 1}"
