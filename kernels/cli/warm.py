"""A warm standby worker: ``python -m myolo.kernels.cli.warm [--nice N]``, kept ready by the node agent.

Why: a new job generation starts new worker processes, and most of a worker's start-up is the interpreter
importing torch and the trainer. A standby pays that ahead of time, writes ``READY_LINE`` on stdout, and
blocks on stdin for one ``WarmHandoff`` (``myolo.events.payloads.warm_handoff``). Then it appends its stdout and
stderr to the handoff's log, moves to its directory, replaces its whole environment with the handoff's
(the one a cold worker gets), and runs exactly what ``python -m myolo.kernels.cli.worker <argv>`` runs. Stdin
closed without a message: the agent retired it; it exits 0. It dies with the agent, before and after the
handoff (``myolo.kernels.worker.orphan``).

What makes that equivalent to a cold start:

- CUDA is not initialised before the handoff (the driver reads ``CUDA_VISIBLE_DEVICES`` once, at its first
  call): the imports do not touch it, and the standby checks so before it says ready (it runs with
  ``CUDA_VISIBLE_DEVICES`` empty until then, so a slip would show no GPU rather than the wrong one).
- Variables read later (rendezvous, NCCL, gloo, the inductor cache) are read after the handoff.
  ``OMP_NUM_THREADS`` is read by the OpenMP runtime when torch loads, so the handoff's value is applied
  with ``torch.set_num_threads``.
- Only the import thread is niced: on Linux a nice value belongs to a thread and cannot be lowered again
  without privilege, so the process trains at the agent's priority while its imports, which run while
  another generation's workers start, yield the CPU to them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import threading
import traceback
from typing import BinaryIO, NoReturn

import msgspec

from myolo.events.payloads.warm_handoff import MAX_HANDOFF_BYTES, READY_LINE, WarmHandoff
from myolo.kernels.worker.orphan import die_with_agent
from myolo.kernels.worker.tracer import let_agent_trace

# what a worker imports before its first step (its run imports the rest of these lazily)
PRELOAD = (
    "torch",
    "torch.distributed",
    "myolo.kernels.cli.worker",
    "myolo.kernels.cli.control",
    "myolo.kernels.worker.link",
    "myolo.kernels.worker.control",
    "myolo.kernels.train.loop",
    "myolo.kernels.train.session",
    "myolo.kernels.checkpoint",
    "myolo.kernels.model.gpt",
    "myolo.kernels.parallel.parallelize",
    "myolo.kernels.data",
    "myolo.kernels.ops.autotune.attention",
    "myolo.kernels.ops.backends.apex_backend",
    "myolo.kernels.ops.backends.native",
    "myolo.kernels.ops.backends.reference",
    "myolo.kernels.ops.backends.triton_backend",
)
EXIT_PRELOAD, EXIT_HANDOFF = 1, 2


class HandoffError(ValueError):
    """The handoff line is too long, unterminated or not a ``WarmHandoff``; the message says which."""


def preload(modules: tuple[str, ...] = PRELOAD, nice: int = 0) -> None:
    """Import ``modules`` (and build the worker's command line parser) in a thread niced by ``nice``."""
    failed: list[BaseException] = []

    def work() -> None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        try:
            for name in modules:
                importlib.import_module(name)
            if "myolo.kernels.cli.worker" in modules:
                import typer

                from myolo.kernels.cli.worker import build_app

                typer.main.get_command(build_app())
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=work, name="warm-preload")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def cuda_touched() -> str | None:
    """Why CUDA may already be set up in this process (then the handoff's GPU would be ignored), or None."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "torch.cuda is initialised"
    with open("/proc/self/maps") as maps:
        if any("libcuda.so" in line for line in maps):
            return "the CUDA driver (libcuda) is loaded"
    return None


def read_handoff(stream: BinaryIO) -> WarmHandoff | None:
    """One JSON line from ``stream``; None at end of file (retired). Raises :class:`HandoffError`."""
    line = stream.readline(MAX_HANDOFF_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_HANDOFF_BYTES:
        raise HandoffError(f"the handoff is longer than {MAX_HANDOFF_BYTES} bytes")
    if not line.endswith(b"\n"):
        raise HandoffError("the handoff line ended without a newline (the agent closed stdin mid-message)")
    try:
        return msgspec.json.decode(line, type=WarmHandoff)
    except msgspec.DecodeError as exc:
        raise HandoffError(f"the handoff is not a WarmHandoff: {exc}") from None


def standby() -> WarmHandoff | None:
    """Say ready on stdout, then wait for the handoff on stdin."""
    os.write(1, READY_LINE)
    return read_handoff(sys.stdin.buffer)


def become(handoff: WarmHandoff) -> None:
    """Take the handoff's log as stdout and stderr (stdin: /dev/null, as a cold worker), its directory and
    its environment. Raises ``OSError`` (before anything changed, when the log or directory is unusable)."""
    log = os.open(handoff.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.chdir(handoff.cwd)
        null = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        os.close(log)
        raise
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, target in ((0, null), (1, log), (2, log)):
        os.dup2(target, fd)
    os.close(log)
    os.close(null)
    os.environ.clear()
    os.environ.update(handoff.env)


def apply_thread_count() -> None:
    """The handoff's ``OMP_NUM_THREADS`` (the OpenMP runtime read the standby's when torch loaded)."""
    raw = os.environ.get("OMP_NUM_THREADS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        import torch

        torch.set_num_threads(int(raw))


def _fail(code: int, what: str) -> NoReturn:
    print(f"myolo-train warm worker (pid {os.getpid()}): error: {what}", file=sys.stderr, flush=True)
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m myolo.kernels.cli.warm", description=__doc__.splitlines()[0])
    parser.add_argument("--nice", type=int, default=10, choices=range(20), metavar="0..19")
    args = parser.parse_args(argv)
    die_with_agent()
    let_agent_trace()
    try:
        preload(PRELOAD, args.nice)
    except BaseException:
        traceback.print_exc()
        _fail(EXIT_PRELOAD, "the imports failed")
    why = cuda_touched()
    if why:
        _fail(EXIT_PRELOAD, f"{why} before the handoff; a worker started from here could not be given its GPU")
    try:
        handoff = standby()
    except HandoffError as exc:
        _fail(EXIT_HANDOFF, str(exc))
    if handoff is None:
        os._exit(0)
    try:
        become(handoff)
    except OSError as exc:
        _fail(EXIT_HANDOFF, f"cannot take the handoff: {exc}")
    from myolo.kernels.cli import worker

    worker.isolate_compile_cache(int(os.environ.get("RANK", "0") or 0))
    apply_thread_count()
    sys.argv = [worker.__file__, *handoff.argv]
    worker.main()


if __name__ == "__main__":
    main()
