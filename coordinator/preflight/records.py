"""What ``POST /v1/preflight`` takes and answers, and the agents' answers it reads.

Verdicts: PASS (the check ran and met its threshold), FAIL (it ran and did not, or the node could not be asked
or did not answer in time: an unverified node is not a ready one), SKIP (nothing to check, with the reason,
e.g. a job that recorded no ``dataSha256``, a node without ``ib_write_lat``). ``ok`` is true when no check FAILed.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from myolo.coordinator.preflight.config import MAX_TIMEOUT_S

CheckName = Literal["driver", "memory", "cuda", "data", "tfrecord", "nccl", "rdma"]
CHECKS: tuple[CheckName, ...] = ("driver", "memory", "cuda", "data", "tfrecord", "nccl", "rdma")
Version = Annotated[str, msgspec.Meta(pattern=r"^\d{1,6}(\.\d{1,6}){0,3}$")]
Verdict = Literal["PASS", "FAIL", "SKIP"]
NodeId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
DEFAULT_MIN_DRIVER = "515.65.01"  # CUDA 11.7 needs it


class PreflightRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Which nodes (default: every Ready node), which checks (default: all) and the thresholds."""

    nodes: Annotated[list[NodeId], msgspec.Meta(min_length=1, max_length=1024)] | None = None
    checks: Annotated[list[CheckName], msgspec.Meta(min_length=1, max_length=len(CHECKS))] | None = None
    min_driver: Version = DEFAULT_MIN_DRIVER
    min_cuda: Version | None = None  # the release's CUDA (torch.version.cuda on each node), e.g. "12.1"
    min_cudnn: Version | None = None  # and cuDNN, e.g. "8.9"
    max_rdma_latency_us: Annotated[float, msgspec.Meta(gt=0, le=1_000_000)] = 10.0  # ib_write_lat's typical
    min_free_memory_pct: Annotated[float, msgspec.Meta(ge=0, le=100)] = 10.0
    min_busbw_gbps: Annotated[float, msgspec.Meta(ge=0, le=100_000)] = 10.0  # GB/s, as nccl-tests prints busbw
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT_S)] | None = None  # default: [preflight] timeout_s


class CheckResult(msgspec.Struct, kw_only=True):
    """One row of the report: a check on a node (the data check: one row per job on it)."""

    node_id: str
    check: CheckName
    verdict: Verdict
    value: str | None = None  # what was found
    threshold: str | None = None  # what it had to be
    reason: str = ""
    subject: str | None = None  # data, tfrecord: job/<name> <path>; memory: the GPU at fault
    command_id: str | None = None  # the command that asked the node, for `GET /v1/commands`


class Thresholds(msgspec.Struct, kw_only=True):
    min_driver: str
    min_free_memory_pct: float
    min_busbw_gbps: float
    timeout_s: float
    min_cuda: str | None = None
    min_cudnn: str | None = None
    max_rdma_latency_us: float = 10.0


class PreflightReport(msgspec.Struct, kw_only=True):
    ok: bool
    passed: int
    failed: int
    skipped: int
    nodes: list[str]
    checks: list[CheckName]
    thresholds: Thresholds
    results: list[CheckResult]
    started: float
    finished: float
    epoch: int
    by: str
