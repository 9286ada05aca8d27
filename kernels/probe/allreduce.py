"""All-reduce bandwidth sweep: ``python -m myolo.kernels.probe.allreduce --world-size 2 --sizes 4096,1048576``.

Spawns ``world_size`` local processes that join one torch.distributed group (NCCL when there are enough
GPUs, gloo on CPU otherwise) and time an all-reduce per message size: warm-up, then ``iters`` timed calls.
The reported time per size is the slowest rank's mean, because a collective is as slow as its slowest
member. Prints one JSON object on stdout; the agent (which never imports torch) runs this as a subprocess
and turns the times into algbw/busbw. Every rank checks the first result (sum of rank+1 over ranks), so a
broken transport is reported as such rather than as a fast number.

Exit codes: 0 ok, 2 bad arguments, 3 torch missing, 4 the sweep failed (message on stderr and in JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from typing import Any

EXIT_BAD_ARGS, EXIT_NO_TORCH, EXIT_FAILED = 2, 3, 4
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}


def _parse_sizes(text: str) -> list[int]:
    sizes: list[int] = []
    for part in text.split(","):
        part = part.strip().lower()
        mult = 1
        for suffix, m in (("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30)):
            if part.endswith(suffix):
                part, mult = part[:-1], m
        try:
            size = int(part) * mult
        except ValueError:
            raise argparse.ArgumentTypeError(f"--sizes: {part!r} is not a byte count (use e.g. 4096,64k,1m)") from None
        if size <= 0:
            raise argparse.ArgumentTypeError(f"--sizes: sizes must be > 0 bytes, got {size}")
        sizes.append(size)
    return sizes


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m myolo.kernels.probe.allreduce", description=__doc__.splitlines()[0])
    p.add_argument("--world-size", type=int, default=2, help="number of local processes (>= 2)")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument("--sizes", type=_parse_sizes, default=_parse_sizes("4k,64k,1m,16m"), help="bytes, comma list")
    p.add_argument("--dtype", choices=tuple(DTYPES), default="float32")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    args = p.parse_args(argv)
    if args.world_size < 2:
        p.error(f"--world-size must be >= 2 (an all-reduce over one process measures nothing), got {args.world_size}")
    if args.warmup < 0 or args.iters < 1:
        p.error(f"--warmup must be >= 0 and --iters >= 1, got {args.warmup} and {args.iters}")
    return args


def _worker(rank: int, args: argparse.Namespace, backend: str, init: str, out_path: str) -> None:
    import torch
    import torch.distributed as dist

    from myolo.kernels.probe.timing import timed_allreduce

    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=args.world_size)
    try:
        device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        if backend == "nccl":
            torch.cuda.set_device(device)
        dtype = getattr(torch, args.dtype)
        n = args.world_size
        expected = n * (n + 1) / 2
        points: list[dict[str, Any]] = []
        verified = True
        for size in args.sizes:
            numel = max(1, size // DTYPES[args.dtype])
            buf = torch.full((numel,), float(rank + 1), dtype=dtype, device=device)
            dist.all_reduce(buf)
            verified = verified and bool(torch.all(buf == expected).item())
            slowest = timed_allreduce(buf, args.warmup, args.iters)
            points.append({"size_bytes": numel * DTYPES[args.dtype], "time_s": slowest})
        ok = torch.tensor([1 if verified else 0], dtype=torch.int32, device=device)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        if rank == 0:
            with open(out_path, "w") as fh:
                json.dump({"points": points, "verified": bool(ok.item())}, fh)
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as err:
        msg = f"torch is not importable by {sys.executable} ({err}); install myolotrain[train] in this environment"
        print(json.dumps({"error": "torch_missing", "message": msg}))
        print(msg, file=sys.stderr)
        return EXIT_NO_TORCH
    backend = args.backend
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend == "auto":
        backend = "nccl" if gpus >= args.world_size and torch.distributed.is_nccl_available() else "gloo"
    if backend == "nccl" and gpus < args.world_size:
        msg = f"--backend nccl needs {args.world_size} GPUs, found {gpus}; use --backend gloo or a smaller --world-size"
        print(json.dumps({"error": "bad_args", "message": msg}))
        print(msg, file=sys.stderr)
        return EXIT_BAD_ARGS
    with tempfile.TemporaryDirectory(prefix="myolo-probe-") as tmp:
        init = f"file://{os.path.join(tmp, 'rendezvous')}"
        out_path = os.path.join(tmp, "result.json")
        try:
            mp.start_processes(
                _worker, args=(args, backend, init, out_path), nprocs=args.world_size, start_method="spawn"
            )
            with open(out_path) as fh:
                result = json.load(fh)
        except Exception as err:
            msg = f"all-reduce sweep failed: {err}"
            traceback.print_exc(file=sys.stderr)
            print(json.dumps({"error": "failed", "message": msg}))
            return EXIT_FAILED
    result.update(
        backend=backend,
        world_size=args.world_size,
        dtype=args.dtype,
        warmup=args.warmup,
        iters=args.iters,
        torch_version=torch.__version__,
        device="cuda" if backend == "nccl" else "cpu",
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
