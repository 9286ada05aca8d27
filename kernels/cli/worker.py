"""Worker entry point: ``python -m myolo.kernels.cli.worker [job options]`` under a torchrun-style environment.

Rank and rendezvous come from RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT (``myolo.kernels.worker``
parses them); the job id, generation and the agent's ZeroMQ endpoints too. Rank 0 writes progress
records on stdout for ``myolo-train``; every replica's reporting rank pushes progress to the agent.
A warm standby (``myolo.kernels.cli.warm``) runs the same ``main`` once it is handed its environment and arguments.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback


def isolate_compile_cache(rank: int) -> None:
    """Give each rank its own inductor cache (unless the user chose one).

    Compiled TP graphs embed the name of their process group, and ranks in different pipeline stages
    have different TP groups; with one shared cache a later stage loaded an earlier stage's graph and
    failed with "Could not resolve the process group". Group names are stable per rank across runs, so
    a per-rank cache still hits on restart. Must run before torch is imported (the import fixes it).
    """
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        user = os.environ.get("USER") or str(os.getuid())
        base = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(base, f"myolo-rank{rank}")


isolate_compile_cache(int(os.environ.get("RANK", "0") or 0))

import typer  # noqa: E402

from myolo.common.logs import configure_logging  # noqa: E402
from myolo.kernels.cli.control import agent_control  # noqa: E402
from myolo.kernels.cli.options import make_command  # noqa: E402
from myolo.kernels.train import progress  # noqa: E402
from myolo.kernels.train.config import JobConfig, JobConfigError  # noqa: E402
from myolo.kernels.worker.orphan import die_with_agent  # noqa: E402
from myolo.kernels.worker.tracer import let_agent_trace  # noqa: E402


def run_worker(job: JobConfig, json_output: bool) -> None:
    del json_output  # the worker always writes machine records; the launcher renders them
    from myolo.kernels.worker.env import WorkerEnv, WorkerEnvError

    try:
        env = WorkerEnv.from_environ()
    except WorkerEnvError as exc:
        typer.echo(f"myolo-train worker: error: {exc}", err=True)
        raise typer.Exit(2) from None
    job.nproc = env.world_size
    if job.job_id == "standalone":
        job.job_id = env.job_id

    import torch

    from myolo.kernels.train.loop import run, shutdown

    if env.world_size > 1 and torch.get_num_threads() > 1 and not torch.cuda.is_available():
        torch.set_num_threads(max(1, torch.get_num_threads() // env.local_world_size))
    control = agent_control(env)
    try:
        if job.runtime.task == "quantize":
            from myolo.kernels.quantization.task import run_quantize

            run_quantize(job, control)
        else:
            run(job, emit=progress.emit if env.rank == 0 else None, control=control)
            shutdown()
    except JobConfigError as exc:
        typer.echo(f"myolo-train worker rank {env.rank}: error: {exc}", err=True)
        raise typer.Exit(2) from None
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        raise typer.Exit(1) from None


def build_app() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(help="Run one training worker (torchrun-style environment).")(make_command(run_worker))
    return app


def main() -> None:
    die_with_agent()
    let_agent_trace()
    configure_logging("info", stream=sys.stderr)  # stdout carries the progress records
    app = build_app()
    try:
        app()
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    else:
        code = 0
    # The run is over and its results are written: leave without the interpreter's teardown, where a gloo
    # thread still joinable in a C++ destructor aborts the process now and then ("terminate called without
    # an active exception"), turning a finished run into a failed one under load.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
