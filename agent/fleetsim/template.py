"""A node's sample as a pre-encoded JSON template: encode the static part once, patch the numbers each tick.

Encoding a full 8-GPU ``NodeSample`` Struct costs tens of microseconds; at 2,000 nodes a second that alone is
a large share of a small machine. The static part of a node's sample (identity, UUIDs, driver, totals,
health) never changes between ticks, so it is encoded once by msgspec (the same encoder every agent uses, so
the bytes are exactly what a real agent sends) and only the readings that move are put in with one bytes
``%`` format. The result decodes into a valid ``NodeSample`` (a unit test proves it).
"""

from __future__ import annotations

import zlib

import msgspec

from myolo.agent.fleetsim.model import FleetSpec
from myolo.events.payloads import GpuProcess, GpuReading, HostReading, NodeSample

GiB = 1 << 30
_ENC = msgspec.json.Encoder()
# the readings that move, in FleetModel's column order; %d takes the float numpy gives and truncates it
_GPU_TAIL = (
    b',"util_gpu":%.1f,"util_mem":%.1f,"mem_used_bytes":%d,"mem_free_bytes":%d,"power_w":%.1f,'
    b'"energy_j":%.1f,"temp_gpu_c":%.1f,"temp_mem_c":%.1f,"clock_sm_mhz":%d}'
)


def gpu_uuid(node_id: str, gpu: int) -> str:
    """A GPU UUID unique to the node id, so simulators in several processes never share one."""
    tag = zlib.crc32(node_id.encode())
    return f"GPU-5115{tag:08x}-{gpu:04x}-4000-8000-{gpu:04x}{zlib.adler32(node_id.encode()):08x}"


def static_gpu(
    node_id: str, gpu: int, spec: FleetSpec, health: str = "ok", reasons: tuple[str, ...] = ()
) -> GpuReading:
    """The fields of a GPU reading that stay the same from one sample to the next: what an agent on an
    H200 publishes, counters at zero and NVLink summarised, so a simulated sample weighs what a real one does."""
    return GpuReading(
        index=gpu,
        uuid=gpu_uuid(node_id, gpu),
        name="NVIDIA H200 (sim)",
        pci_bus_id=f"00000000:{0x18 + 0x10 * gpu:02X}:00.0",
        minor_number=gpu,
        util_enc=0.0,
        util_dec=0.0,
        mem_total_bytes=spec.mem_total,
        mem_reserved_bytes=spec.mem_reserved,
        power_limit_w=spec.tdp_w,
        clock_mem_mhz=3201,
        clock_event_reasons=[],
        violation_power_ns=0,
        violation_thermal_ns=0,
        ecc_corrected_volatile=0,
        ecc_uncorrected_volatile=0,
        ecc_corrected_aggregate=0,
        ecc_uncorrected_aggregate=0,
        retired_pages_dbe=0,
        remapped_rows_correctable=0,
        remapped_rows_uncorrectable=0,
        remapped_rows_pending=False,
        remapped_rows_failure=False,
        pcie_replay_counter=0,
        pcie_link_gen=5,
        pcie_link_width=16,
        nvlink_links=18,
        nvlink_active=18,
        nvlink_replay_errors=0,
        nvlink_recovery_errors=0,
        nvlink_crc_flit_errors=0,
        nvlink_crc_data_errors=0,
        processes=[GpuProcess(pid=40000 + gpu, name="python")],
        health=health,  # type: ignore[arg-type]
        health_reasons=list(reasons),
    )


def _escape(b: bytes) -> bytes:
    return b.replace(b"%", b"%%")


def sample_template(
    node_id: str,
    gpus: int,
    spec: FleetSpec,
    *,
    interval_s: float = 1.0,
    health: str = "ok",
    reasons: tuple[str, ...] = (),
    gpu_health: dict[int, tuple[str, tuple[str, ...]]] | None = None,
    agent_version: str = "4.0.0-fleetsim",
) -> bytes:
    """The bytes format of one node's sample. Fill it with ``template % (*gpu_values, seq, cpu_percent)``
    (a row of :meth:`FleetModel.step`).

    ``gpu_health`` maps a GPU index to its (health, reasons) when it is not ok (after an injected fault)."""
    gpu_health = gpu_health or {}
    parts = []
    for g in range(gpus):
        h, why = gpu_health.get(g, ("ok", ()))
        static = _ENC.encode(static_gpu(node_id, g, spec, h, why))
        parts.append(_escape(static[:-1]) + _GPU_TAIL)  # drop the closing brace, add the moving fields
    node = NodeSample(
        node_id=node_id,
        backend="sim",
        gpus=[],
        seq=1,  # a placeholder that is not the omitted default; replaced below
        interval_s=interval_s,
        health=health,  # type: ignore[arg-type]
        health_reasons=list(reasons),
        host=HostReading(mem_total_bytes=2048 * GiB, mem_used_bytes=384 * GiB, load1=8.0, cpu_percent=1.0),
        driver_version="570.86.15",
        cuda_version="12.8",
        agent_version=agent_version,
    )
    head = _escape(_ENC.encode(node))
    if b'"seq":1,' not in head or b'"cpu_percent":1.0' not in head or b'"gpus":[]' not in head:
        raise AssertionError("NodeSample's encoding changed: update agent/fleetsim/template.py")
    head = head.replace(b'"seq":1,', b'"seq":%d,', 1).replace(b'"cpu_percent":1.0', b'"cpu_percent":%.1f', 1)
    return head.replace(b'"gpus":[]', b'"gpus":[' + b",".join(parts) + b"]", 1)
