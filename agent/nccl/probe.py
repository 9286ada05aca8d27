"""Run the all-reduce bandwidth sweep (``myolo.kernels.probe.allreduce``) as a subprocess and report bandwidths.

Why a subprocess: the agent never imports torch (it must start in milliseconds and stay small); the probe
brings torch and spawns its own ranks. The agent owns the timeout, kills the whole process group when it
expires, and turns the probe's times into nccl-tests style figures: algbw = S / t, busbw = algbw x 2(n-1)/n
for all-reduce (the factor makes busbw comparable with the link's peak, whatever the number of ranks).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from myolo.events.payloads import BandwidthPoint, BandwidthReport
from myolo.events.payloads.reports import allreduce_bus_factor

MODULE = "myolo.kernels.probe.allreduce"
EXIT_BAD_ARGS, EXIT_NO_TORCH = 2, 3


class ProbeError(RuntimeError):
    """The probe could not produce a report; the message says why and what to change."""


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    world_size: int = 2
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    sizes: tuple[int, ...] = (4 << 10, 64 << 10, 1 << 20, 16 << 20)
    warmup: int = 3
    iters: int = 10
    dtype: str = "float32"

    def validate(self) -> None:
        if self.world_size < 2:
            raise ProbeError(f"probe world_size must be >= 2, got {self.world_size}")
        if not self.sizes or any(s <= 0 for s in self.sizes):
            raise ProbeError(f"probe sizes must be a non-empty list of byte counts > 0, got {list(self.sizes)}")
        if self.warmup < 0 or self.iters < 1:
            raise ProbeError(f"probe warmup must be >= 0 and iters >= 1, got {self.warmup} and {self.iters}")

    def argv(self) -> list[str]:
        return [
            "--world-size",
            str(self.world_size),
            "--backend",
            self.backend,
            "--sizes",
            ",".join(map(str, self.sizes)),
            "--warmup",
            str(self.warmup),
            "--iters",
            str(self.iters),
            "--dtype",
            self.dtype,
        ]


def bandwidth_points(times: Sequence[tuple[int, float]], world_size: int) -> list[BandwidthPoint]:
    """(size bytes, seconds) -> points with algbw and busbw in GB/s (1e9 bytes/s, as nccl-tests prints)."""
    factor = allreduce_bus_factor(world_size)
    points = []
    for size, t in times:
        if t <= 0:
            raise ProbeError(f"probe returned a non-positive time {t!r} s for {size} bytes")
        algbw = size / t / 1e9
        points.append(BandwidthPoint(size_bytes=size, time_s=t, algbw_gbps=algbw, busbw_gbps=algbw * factor))
    return points


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def run_probe(
    node_id: str,
    spec: ProbeSpec | None = None,
    *,
    timeout_s: float = 300.0,
    python: Sequence[str] = (sys.executable,),
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    command_id: str | None = None,
) -> BandwidthReport:
    """Run the sweep and return its report, or raise :class:`ProbeError` with the reason.

    ``python`` is the interpreter command that has torch (the trainer's venv may differ from the agent's);
    ``cwd`` and ``env`` are passed to it (``kernels`` must be importable there).
    """
    spec = spec or ProbeSpec()
    spec.validate()
    if timeout_s <= 0:
        raise ProbeError(f"probe timeout_s must be > 0, got {timeout_s}")
    proc = await asyncio.create_subprocess_exec(
        *python,
        "-m",
        MODULE,
        *spec.argv(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,  # its own process group, so a timeout kills the spawned ranks too
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        _kill_group(proc)
        await proc.wait()
        raise ProbeError(
            f"bandwidth probe did not finish within {timeout_s:g} s and was killed; raise the probe timeout or "
            "use fewer/smaller sizes and iterations"
        ) from None
    except asyncio.CancelledError:
        _kill_group(proc)
        raise
    finally:
        if proc.returncode is None:
            _kill_group(proc)
    return _report(node_id, spec, proc.returncode, out, err, python, command_id)


def _report(
    node_id: str,
    spec: ProbeSpec,
    rc: int | None,
    out: bytes,
    err: bytes,
    python: Sequence[str],
    command_id: str | None,
) -> BandwidthReport:
    stderr = err.decode("utf-8", "replace").strip()
    tail = stderr[-600:]
    if f"No module named '{MODULE.split('.')[0]}" in stderr:
        raise ProbeError(
            f"{' '.join(python)} cannot import the probe module {MODULE}; run the agent from the myolotrain "
            "install or pass the probe's cwd/PYTHONPATH"
        )
    last = out.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    try:
        result = json.loads(last[0])
    except json.JSONDecodeError:
        result = None
    if rc == EXIT_NO_TORCH or "No module named 'torch'" in stderr:
        raise ProbeError(
            f"torch is not installed for {' '.join(python)}: the bandwidth probe needs it. Install "
            "myolotrain[train] there or point the probe's python at the trainer's environment"
        )
    if rc != 0 or not isinstance(result, dict) or "points" not in result:
        why = result.get("message") if isinstance(result, dict) else None
        raise ProbeError(f"bandwidth probe failed (exit {rc}): {why or tail or 'no output'}")
    if not result.get("verified", False):
        raise ProbeError("bandwidth probe: the all-reduce returned wrong sums; the transport is broken")
    times = [(int(p["size_bytes"]), float(p["time_s"])) for p in result["points"]]
    return BandwidthReport(
        node_id=node_id,
        backend=result["backend"],
        world_size=int(result["world_size"]),
        points=bandwidth_points(times, int(result["world_size"])),
        command_id=command_id,
    )
