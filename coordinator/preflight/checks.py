"""Each check's judgement, from what the fleet view holds or what an agent answered: pure, one row each.

- driver: the node's newest sample's driver version against ``min_driver`` (numbers compared part by part:
  ``550.54.15 (sim)`` reads as 550.54.15);
- memory: every GPU's free memory in % of its total, against ``min_free_memory_pct`` (the OOM killer's margin);
- data: the SHA-256 the node's agent computed for a job's data file against the job's ``dataSha256``;
- nccl: the peak all-reduce bus bandwidth the node's probe measured against ``min_busbw_gbps`` (GB/s).
"""

from __future__ import annotations

import re

from myolo.coordinator.fleet.interface import NodeState
from myolo.coordinator.preflight.records import CheckResult
from myolo.events.payloads.commands import FileDigest, NcclProbeResult

_VERSION = re.compile(r"^\s*(\d+(?:\.\d+)*)")
GIB = 2**30


def version_tuple(text: str) -> tuple[int, ...] | None:
    """``"550.54.15 (sim)"`` -> (550, 54, 15); None when it starts with no number."""
    m = _VERSION.match(text)
    return tuple(int(p) for p in m[1].split(".")) if m else None


def _at_least(have: tuple[int, ...], want: tuple[int, ...]) -> bool:
    width = max(len(have), len(want))
    return have + (0,) * (width - len(have)) >= want + (0,) * (width - len(want))


def driver(node: NodeState, min_driver: str) -> CheckResult:
    row = CheckResult(node_id=node.node_id, check="driver", verdict="FAIL", threshold=f">= {min_driver}")
    sim = " (simulated GPUs)" if node.backend == "sim" else ""
    if not node.driver_version:
        row.reason = "the node reported no driver version (no GPU backend, or an agent too old to say)"
        return row
    row.value = node.driver_version
    have, want = version_tuple(node.driver_version), version_tuple(min_driver)
    if have is None or want is None:
        row.reason = f"cannot read {node.driver_version!r} as a version number"
        return row
    if _at_least(have, want):
        row.verdict, row.reason = "PASS", f"driver {'.'.join(map(str, have))} >= {min_driver}{sim}"
    else:
        row.reason = (
            f"driver {'.'.join(map(str, have))} is older than {min_driver} (CUDA 11.7 needs 515.65.01 or newer): "
            f"upgrade the driver on {node.node_id} first{sim}"
        )
    return row


def memory(node: NodeState, min_free_pct: float) -> CheckResult:
    """One row per node: the GPU with the least free memory decides; the reason names every GPU below."""
    row = CheckResult(node_id=node.node_id, check="memory", verdict="SKIP", threshold=f">= {min_free_pct:g}% free")
    free: list[tuple[float, int, int, int]] = []  # (pct, index, free bytes, total bytes)
    for gpu in node.gpus:
        total = gpu.mem_total_bytes
        if not total:
            continue
        if gpu.mem_free_bytes is not None:
            avail = gpu.mem_free_bytes
        elif gpu.mem_used_bytes is not None:
            avail = max(0, total - gpu.mem_used_bytes)
        else:
            continue
        free.append((100.0 * avail / total, gpu.index, avail, total))
    if not free:
        row.reason = "the node reports no GPU memory (no GPUs, or a backend that does not read memory)"
        return row
    pct, index, avail, total = min(free)
    row.value = f"{pct:.1f}% free (GPU {index}: {avail / GIB:.1f} of {total / GIB:.1f} GiB)"
    row.subject = f"gpu {index}"
    short = [f"GPU {i} {p:.1f}%" for p, i, _, _ in sorted(free, key=lambda f: f[1]) if p < min_free_pct]
    if short:
        row.verdict = "FAIL"
        row.reason = (
            f"less than {min_free_pct:g}% free on {', '.join(short)}: the OOM killer's margin is gone; "
            "stop or shrink what runs there"
        )
    else:
        row.verdict, row.reason = "PASS", f"every GPU ({len(free)}) has >= {min_free_pct:g}% free"
    return row


def data(node_id: str, job: str, path: str, expected: str, found: FileDigest | None) -> CheckResult:
    """The agent's digest of ``path`` against the job's ``dataSha256``."""
    row = CheckResult(
        node_id=node_id,
        check="data",
        verdict="FAIL",
        subject=f"job/{job} {path}",
        threshold=f"sha256 {expected}",
    )
    if found is None:
        row.reason = f"the agent's answer does not mention {path}"
    elif found.error is not None or found.sha256 is None:
        row.reason = f"{path} on {node_id}: {found.error or 'no digest in the answer'}"
    elif found.sha256 != expected:
        row.value = f"sha256 {found.sha256} ({found.size} bytes)"
        row.reason = (
            f"{path} on {node_id} hashes to {found.sha256}, not the {expected} job {job} recorded: the data "
            "changed or the file is another; restore it (or record the new digest in the job's dataSha256)"
        )
    else:
        row.value = f"sha256 {found.sha256} ({found.size} bytes)"
        row.verdict, row.reason = "PASS", f"{path} matches job {job}'s dataSha256"
    return row


def nccl(node_id: str, summary: NcclProbeResult, min_busbw_gbps: float) -> CheckResult:
    row = CheckResult(
        node_id=node_id,
        check="nccl",
        verdict="FAIL",
        value=f"{summary.peak_busbw_gbps:.2f} GB/s busbw ({summary.backend}, {summary.world_size} ranks, "
        f"at {summary.peak_size_bytes} bytes)",
        threshold=f">= {min_busbw_gbps:g} GB/s",
    )
    if summary.peak_busbw_gbps >= min_busbw_gbps:
        row.verdict, row.reason = "PASS", f"peak all-reduce bus bandwidth >= {min_busbw_gbps:g} GB/s"
    else:
        row.reason = (
            f"peak all-reduce bus bandwidth {summary.peak_busbw_gbps:.2f} GB/s is below {min_busbw_gbps:g} GB/s"
            + (": gloo measures the CPU path, not the GPUs' links" if summary.backend == "gloo" else "")
            + "; check NVLink/PCIe (nvidia-smi topo -m) and NCCL_DEBUG=INFO"
        )
    return row
