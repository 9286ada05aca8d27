"""``myolo-train``: run a job on this machine alone, like ``torchrun --standalone``.

Validates the job before anything starts, hosts the rendezvous store on a port the kernel picks, spawns
``--nproc`` workers with torchrun-style environments, renders rank 0's progress records, and if any rank fails stops the rest and
reports the *first* failing rank's error: the others only die of "connection closed by peer" after it.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

# Read before the imports below pull in torch, which fills in its own default for this variable.
_USER_INDUCTOR_CACHE = os.environ.get("TORCHINDUCTOR_CACHE_DIR")

import typer  # noqa: E402
from torch.distributed import TCPStore  # noqa: E402

from myolo.kernels.cli.options import make_command  # noqa: E402
from myolo.kernels.parallel import rendezvous  # noqa: E402
from myolo.kernels.train import progress  # noqa: E402
from myolo.kernels.train.config import JobConfig, JobConfigError  # noqa: E402
from myolo.kernels.train.records import Record  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
GRACE_S = 10.0  # how long survivors get to exit on their own after a rank fails
DRAIN_S = 30.0  # how long to wait for the last lines of exited workers


@dataclass
class Worker:
    rank: int
    proc: subprocess.Popen[str]
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=60))
    exit_time: float | None = None
    pumps: list[threading.Thread] = field(default_factory=list)  # readers of its stdout and stderr


def worker_env(rank: int, nproc: int, store: TCPStore, job_id: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(nproc),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(nproc),
        **rendezvous.worker_env(store),
        MYOLO_JOB_ID=job_id,
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p),
    )
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    # One inductor cache per rank (see myolo.kernels.cli.worker.isolate_compile_cache); the worker picks the
    # default location when the user set none.
    if _USER_INDUCTOR_CACHE:
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_USER_INDUCTOR_CACHE, f"myolo-rank{rank}")
    else:
        env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    for name in ("MYOLO_ZMQ_PROGRESS", "MYOLO_ZMQ_CONTROL"):
        env.pop(name, None)  # standalone: no agent
    return env


def _pump(stream: IO[str], on_line) -> None:
    for line in stream:
        on_line(line)
    stream.close()


def spawn(job_file: Path, nproc: int, job_id: str, store: TCPStore, on_record) -> list[Worker]:
    workers: list[Worker] = []
    for rank in range(nproc):
        proc = subprocess.Popen(
            [sys.executable, "-m", "myolo.kernels.cli.worker", "--config", str(job_file)],
            env=worker_env(rank, nproc, store, job_id),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        w = Worker(rank, proc)
        workers.append(w)

        def on_out(line: str, w: Worker = w) -> None:
            rec = progress.parse(line)
            if rec is not None and w.rank == 0:
                on_record(rec)
            elif line.strip():
                w.tail.append(line.rstrip("\n"))

        def on_err(line: str, w: Worker = w) -> None:
            w.tail.append(line.rstrip("\n"))

        w.pumps = [
            threading.Thread(target=_pump, args=args, daemon=True)
            for args in ((proc.stdout, on_out), (proc.stderr, on_err))
        ]
        for t in w.pumps:
            t.start()
    return workers


def drain(workers: list[Worker], timeout_s: float = DRAIN_S) -> None:
    """Wait until every line the exited workers wrote has been read (their pipes reach end of file).

    Bounded: a process a worker started may hold a pipe open after the worker is gone."""
    deadline = time.monotonic() + timeout_s
    for w in workers:
        for t in w.pumps:
            t.join(max(0.0, deadline - time.monotonic()))


# What a rank says when it died only because another one did (its peer's socket closed under it).
COLLATERAL = ("Connection closed by peer", "Connection reset by peer", "remote worker crashing", "Broken pipe")


def cause(failed: list[Worker]) -> Worker | None:
    """The failed rank that has the cause: the earliest whose error is not just a peer's socket closing.

    Exit order alone misleads under load: a survivor can notice the dead peer and exit before the launcher
    has seen the crashed rank's own exit."""
    failed = sorted(failed, key=lambda w: w.exit_time or 0.0)
    own = [w for w in failed if not any(c in line for line in w.tail for c in COLLATERAL)]
    return (own or failed or [None])[0]


def supervise(workers: list[Worker]) -> Worker | None:
    """Wait for all workers; on the first failure stop the others. Returns the failed rank with the cause."""
    deadline: float | None = None
    while True:
        running = 0
        for w in workers:
            if w.exit_time is None and w.proc.poll() is not None:
                w.exit_time = time.monotonic()
                if w.proc.returncode != 0 and deadline is None:
                    deadline = time.monotonic() + GRACE_S
            running += w.exit_time is None
        if running == 0:
            return cause([w for w in workers if w.proc.returncode != 0])
        if deadline is not None and time.monotonic() > deadline:
            stop_all(workers)
            deadline = time.monotonic() + 3600
        time.sleep(0.05)


def stop_all(workers: list[Worker], sig: int = signal.SIGTERM) -> None:
    for w in workers:
        if w.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(w.proc.pid, sig)
    for w in workers:
        try:
            w.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(w.proc.pid, signal.SIGKILL)
            w.proc.wait()


def failure_message(w: Worker) -> str:
    tail = "\n".join(f"  {line}" for line in w.tail)
    return f"myolo-train: rank {w.rank} failed first (exit code {w.proc.returncode}):\n{tail}"


def launch(job: JobConfig, json_output: bool) -> None:
    try:
        job.validate(job.nproc)
    except JobConfigError as exc:
        typer.echo(f"myolo-train: error: {exc}", err=True)
        raise typer.Exit(2) from None
    renderer = progress.Renderer(as_json=json_output)
    lock = threading.Lock()

    def on_record(rec: Record) -> None:
        with lock:
            renderer.show(rec)

    with tempfile.TemporaryDirectory(prefix="myolo-train-") as tmp:
        job_file = Path(tmp) / "job.json"
        job_file.write_text(json.dumps(json.loads(job.to_json()), indent=1))
        store = rendezvous.host_store()  # held until every worker has exited
        workers = spawn(job_file, job.nproc, job.job_id, store, on_record)
        try:
            failed = supervise(workers)
        except KeyboardInterrupt:
            stop_all(workers)
            renderer.finish_line()
            typer.echo("myolo-train: interrupted", err=True)
            raise typer.Exit(130) from None
        drain(workers)
    renderer.finish_line()
    if failed is not None:
        typer.echo(failure_message(failed), err=True)
        code = failed.proc.returncode
        raise typer.Exit(code if 0 < code < 128 else 1)


def main() -> None:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(help="Train a GPT on this machine with --nproc worker processes (pp x dp x tp).")(make_command(launch))
    app()


if __name__ == "__main__":
    main()
