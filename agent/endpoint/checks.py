"""The checks behind ``/healthz``: NVML, Kafka, spool and GPUs, each ok / warn / fail with a reason.

The levels are the tree's one health scale (``myolo.events.payloads.common.Health``), the same a GPU's and a node's
health use. Kept as plain functions of the agent's state so the rules are tested without HTTP. The overall
status is the worst check: Kafka being away is only *warn* because the spool keeps every event; so are events
the spool lost (they are counted and reported); a spool that cannot be written or read, a GPU backend that
cannot be read or a GPU in ``fail`` health is *fail*.
"""

from __future__ import annotations

import msgspec

from myolo.agent.spool import SpoolStats
from myolo.events.payloads.common import Health, worst_health


class Check(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: Health
    detail: str
    data: dict[str, object] = {}


class HealthReport(msgspec.Struct, kw_only=True):
    status: Health
    checks: dict[str, Check]
    node_id: str
    backend: str
    agent_version: str


def report(node_id: str, backend: str, version: str, checks: dict[str, Check]) -> HealthReport:
    return HealthReport(
        status=worst_health(c.status for c in checks.values()),
        checks=checks,
        node_id=node_id,
        backend=backend,
        agent_version=version,
    )


def check_nvml(backend: str, gpu_count: int, error: str | None, read_age_s: float | None, interval_s: float) -> Check:
    """The GPU backend opened and its reads keep coming (a read older than 5 intervals means a stuck driver)."""
    what = "simulated GPUs (sim backend)" if backend == "sim" else "NVML"
    if error is not None:
        return Check(status="fail", detail=f"{what}: {error}")
    if read_age_s is None:
        return Check(status="warn", detail=f"{what}: no reading yet", data={"gpus": gpu_count})
    if read_age_s > 5 * interval_s:
        return Check(
            status="fail",
            detail=f"{what}: last reading {read_age_s:.0f}s ago (interval {interval_s:g}s)",
            data={"gpus": gpu_count},
        )
    return Check(status="ok", detail=f"{what}: {gpu_count} GPUs", data={"gpus": gpu_count})


def check_kafka(state: str, last_error: str | None, ack_age_s: float | None, pending: int) -> Check:
    data: dict[str, object] = {"pending": pending}
    if ack_age_s is not None:
        data["last_ack_age_s"] = round(ack_age_s, 3)
    if state == "ok":
        return Check(status="ok", detail="connected, events acknowledged", data=data)
    if state == "connecting":
        return Check(status="warn", detail="not connected yet; events are spooled", data=data)
    return Check(status="warn", detail=f"unreachable, events are spooled: {last_error}", data=data)


def check_spool(stats: SpoolStats, error: str | None, degraded_fraction: float) -> Check:
    """``fail`` when the spool cannot be written or read; ``warn`` when events were lost (any reason), the
    cursor cannot be written, or the spool is nearly full. Torn writes cut off and cursors not trusted on
    start cost no event and are only noted."""
    data: dict[str, object] = {
        "pending": stats.pending_records,
        "bytes": stats.bytes,
        "max_bytes": stats.max_bytes,
        "dropped": stats.dropped,
        "over_cap": stats.over_cap,
        "corrupt_frames": stats.corrupt_frames,
        "failed_writes": stats.failed_writes,
        "torn_tails": stats.torn_tails,
        "cursor_resets": stats.cursor_resets,
    }
    if error is not None:
        return Check(status="fail", detail=error, data=data)
    problems = []
    if stats.dropped:
        problems.append(f"{stats.dropped} events lost since start ({stats.why_dropped()})")
    if stats.cursor_error is not None:
        problems.append(f"{stats.cursor_error}; acknowledged events may be sent again")
    if stats.bytes > degraded_fraction * stats.max_bytes:
        problems.append(f"spool {100 * stats.bytes / stats.max_bytes:.0f}% full")
    if problems:
        return Check(status="warn", detail="; ".join(problems), data=data)
    notes = [f"{stats.pending_records} events waiting"]
    if stats.torn_tails:
        notes.append(f"{stats.torn_tails} write(s) cut short by a crash were cut off on start")
    if stats.cursor_resets:
        notes.append("the cursor was not trusted on start: events were sent again from the oldest")
    return Check(status="ok", detail="; ".join(notes), data=data)


def check_gpus(health: Health | None, reasons: list[str], per_gpu: dict[int, Health]) -> Check:
    data: dict[str, object] = {"per_gpu": {str(k): v for k, v in sorted(per_gpu.items())}}
    if health is None:
        return Check(status="warn", detail="no sample yet", data=data)
    detail = "; ".join(reasons) if reasons else "all GPUs healthy"
    return Check(status=health, detail=detail, data=data)
