"""One realistic example of every payload: for docs, the demo, tests and the codec benchmark."""

from __future__ import annotations

from events.payloads import (
    AuditRecord,
    BandwidthPoint,
    BandwidthReport,
    Command,
    CommandAck,
    DriftSample,
    FeatureSummary,
    GpuProcess,
    GpuReading,
    HostReading,
    LeakReport,
    NcclChannel,
    NcclReport,
    NodeFault,
    NodeSample,
    NvLink,
    Payload,
    ReleasePublished,
    TrainingCompleted,
    TrainingFault,
    TrainingProgress,
)
from events.types import type_name

GIB = 1 << 30


def gpu_reading(index: int = 0, util: float = 87.5) -> GpuReading:
    """A busy H200-class GPU with the fields an NVML backend fills in."""
    return GpuReading(
        index=index,
        uuid=f"GPU-SIM-{index:04d}-0000-0000-000000000000",
        name="NVIDIA H200 (sim)",
        util_gpu=util,
        util_mem=41.0,
        mem_total_bytes=141 * GIB,
        mem_used_bytes=97 * GIB,
        mem_free_bytes=43 * GIB,
        mem_reserved_bytes=1 * GIB,
        power_w=612.4,
        power_limit_w=700.0,
        energy_j=123456.7,
        temp_gpu_c=64.0,
        temp_mem_c=71.0,
        clock_sm_mhz=1980,
        clock_mem_mhz=3201,
        clock_event_reasons=[],
        violation_power_ns=0,
        violation_thermal_ns=0,
        ecc_corrected_volatile=0,
        ecc_uncorrected_volatile=0,
        ecc_corrected_aggregate=3,
        ecc_uncorrected_aggregate=0,
        retired_pages_sbe=0,
        retired_pages_dbe=0,
        retired_pages_pending=False,
        remapped_rows_correctable=0,
        remapped_rows_uncorrectable=0,
        remapped_rows_pending=False,
        remapped_rows_failure=False,
        pcie_tx_bytes_s=1.2e9,
        pcie_rx_bytes_s=0.8e9,
        pcie_replay_counter=0,
        pcie_link_gen=5,
        pcie_link_width=16,
        nvlink=[NvLink(link=i, active=True, replay_errors=0, recovery_errors=0) for i in range(2)],
        processes=[GpuProcess(pid=4242 + index, used_bytes=96 * GIB, name="myolo-train")],
    )


def node_sample(node_id: str = "gpu-node-001", gpus: int = 8, seq: int = 0) -> NodeSample:
    return NodeSample(
        node_id=node_id,
        backend="sim",
        gpus=[gpu_reading(i) for i in range(gpus)],
        seq=seq,
        host=HostReading(cpu_percent=23.0, mem_total_bytes=2048 * GIB, mem_used_bytes=512 * GIB, load1=12.5),
        driver_version="570.86.15",
        cuda_version="12.8",
        agent_version="4.0.0",
        address="10.0.3.17",
        health_url="http://10.0.3.17:8080",
    )


def example_payloads(node_id: str = "gpu-node-001") -> dict[str, Payload]:
    """Type name -> one valid example payload, covering every registered type."""
    examples: list[Payload] = [
        node_sample(node_id),
        NodeFault(
            node_id=node_id,
            kind="xid",
            health="fail",
            reasons=["XID 79: GPU fell off the bus"],
            gpu_index=3,
            xid=79,
            simulated=True,
        ),
        NcclReport(
            node_id=node_id,
            pid=4242,
            rank=0,
            nranks=16,
            nnodes=2,
            local_rank=0,
            version="2.19.3+cuda12.3",
            network="IB",
            transports=["P2P", "NET/IB"],
            channels=[NcclChannel(channel=0, src="0[0]", dst="1[1]", transport="P2P/direct pointer")],
            init_complete=True,
            comm_id="0xf021d9037f9243d8",
        ),
        BandwidthReport(
            node_id=node_id,
            backend="gloo",
            world_size=2,
            points=[BandwidthPoint(size_bytes=1 << 20, time_s=0.001, algbw_gbps=1.05, busbw_gbps=1.05)],
        ),
        LeakReport(
            node_id=node_id,
            subject="gpu",
            gpu_index=0,
            slope_pct_per_h=0.52,
            lower_pct_per_h=0.41,
            upper_pct_per_h=0.63,
            window_s=1800.0,
            samples=1800,
            alert=True,
        ),
        TrainingProgress(
            job_id="llm-pretrain",
            generation=2,
            rank=0,
            world_size=16,
            step=1200,
            loss=2.31,
            tokens_per_s=45_000.0,
            step_time_s=0.72,
            grad_norm=0.9,
            gradient_staleness=0,
            backends={"rms_norm": "native", "adamw": "native"},
        ),
        TrainingFault(
            job_id="llm-pretrain",
            generation=2,
            node_id=node_id,
            kind="worker_exit",
            rank=5,
            pid=48213,
            signal="SIGKILL",
            last_step=1200,
            log_tail=["step 1200 loss 2.3100", "Killed"],
            message="rank 5 (pid 48213) was killed by SIGKILL",
        ),
        TrainingCompleted(
            job_id="llm-pretrain", generation=2, node_id=node_id, ranks=[4, 5, 6, 7], last_step=5000, duration_s=3600.0
        ),
        DriftSample(
            model="credit-risk",
            version="7",
            count=1000,
            features={
                "income": FeatureSummary(values=[52.1, 48.3, 61.0]),
                "age": FeatureSummary(bin_edges=[18, 30, 50, 90], counts=[310, 420, 270]),
            },
        ),
        ReleasePublished(
            component="myolo-agent", version="4.1.0", artifact="file:///srv/releases/agent-4.1.0.whl", sha256="0" * 64
        ),
        Command(command_id="cmd-0001", node_id=node_id, epoch=3, action="nccl_probe", args={"sizes": [1 << 20]}),
        CommandAck(command_id="cmd-0001", node_id=node_id, epoch=3, status="done"),
        AuditRecord(
            request_id="req-0001",
            outcome="done",
            who="alice",
            role="operator",
            method="POST",
            path=f"/v1/nodes/{node_id}/cordon",
            route="/v1/nodes/{node_id}/cordon",
            target=node_id,
            status=200,
            remote="10.0.0.9",
            coordinator="coordinator-1",
            time=1_767_225_600.0,
        ),
    ]
    return {type_name(p): p for p in examples}
