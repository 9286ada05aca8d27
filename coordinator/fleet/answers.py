"""The JSON shapes of the fleet's API: a node, a GPU row (plain dicts, ready for json or yaml), and the
request and answer Structs of the sample-interval route.

Computed facts (cordoned, schedulable, seconds since the last sample) are added here so every client (the
CLI, dashboards, scripts) reads the same answer instead of re-deriving it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from myolo.coordinator.fleet.model import NodeState
from myolo.events.payloads import GpuReading

GPU_FIELDS = (
    "index",
    "uuid",
    "name",
    "util_gpu",
    "util_mem",
    "mem_used_bytes",
    "mem_total_bytes",
    "temp_gpu_c",
    "power_w",
    "power_limit_w",
    "clock_event_reasons",
    "ecc_uncorrected_volatile",
    "health",
    "health_reasons",
)


def age(now: float, then: float | None) -> float | None:
    return None if then is None else round(max(0.0, now - then), 3)


def node_json(node: NodeState, now: float) -> dict[str, Any]:
    """Everything the coordinator knows about one node (``GET /v1/nodes/{id}``)."""
    body: dict[str, Any] = msgspec.to_builtins(node)
    body["gpus"] = [gpu_json(g) for g in node.gpus]
    body["cordoned"] = node.cordoned
    body["schedulable"] = node.schedulable
    body["last_seen_age_s"] = age(now, node.last_seen)
    return body


def node_summary(node: NodeState, now: float) -> dict[str, Any]:
    """One row of ``GET /v1/nodes``: the node without its long lists (faults, NCCL, leaks are counted) and its
    last probe."""
    body = node_json(node, now)
    for key in ("recent_faults", "nccl", "leaks"):
        body[f"{key}_count"] = len(body.pop(key))
    body.pop("bandwidth", None)  # the probe's points: in GET /v1/nodes/{id}
    body["gpu_count"] = len(node.gpus)
    body["gpus"] = [gpu_row(node, g) for g in body["gpus"]]
    return body


def gpu_json(gpu: GpuReading) -> dict[str, Any]:
    """A GPU reading with its health spelled out (payloads omit default values on the wire)."""
    body: dict[str, Any] = msgspec.to_builtins(gpu)
    body.setdefault("health", gpu.health)
    body.setdefault("health_reasons", list(gpu.health_reasons))
    return body


def gpu_row(node: NodeState, gpu: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"node_id": node.node_id}
    row.update({k: gpu[k] for k in GPU_FIELDS if k in gpu})
    return row


def gpu_rows(nodes: list[NodeState]) -> list[dict[str, Any]]:
    """Every GPU of the fleet, one row each, with the state of its node (``GET /v1/gpus``)."""
    rows = []
    for node in nodes:
        for gpu in node.gpus:
            row = gpu_row(node, gpu_json(gpu))
            row["node_liveness"] = node.liveness
            row["node_cordoned"] = node.cordoned
            rows.append(row)
    return rows


INTERVAL_HINT = 'send a JSON object like {"interval_s": 5}: seconds between samples, 0.05 to 3600'


class IntervalRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Body of ``POST /v1/nodes/{node_id}/interval``: the agent's new sample interval (its bounds are the
    action's, checked where the command is built)."""

    interval_s: float


class IntervalSent(msgspec.Struct, kw_only=True, frozen=True):
    """The command on its way: ``GET /v1/commands?node=`` shows what became of it."""

    node_id: str
    command_id: str
    interval_s: float
