"""Line parser: the real NCCL/PyTorch lines from the notes, old and new forms, and garbage."""

from __future__ import annotations

import pytest

from myolo.agent.nccl.parse import (
    ChannelCounts,
    CommInfo,
    InitComplete,
    InitStart,
    NetDevices,
    Network,
    Ring,
    Transport,
    Trees,
    Version,
    Warn,
    WatchdogTimeout,
    parse_line,
    transport_kind,
)


def test_prefix_gives_process_and_device() -> None:
    parsed = parse_line("h:1:2 [6] NCCL INFO comm 0x8ec0ac0 rank 6 nRanks 16 nNodes 2 localRanks 8 localRank 6 MNNVL 0")
    assert parsed is not None and parsed.prefix is not None
    assert (parsed.prefix.host, parsed.prefix.pid, parsed.prefix.tid, parsed.prefix.cuda_dev) == ("h", 1, 2, 6)
    assert parsed.record == CommInfo(comm="0x8ec0ac0", rank=6, nranks=16, nnodes=2, local_ranks=8, local_rank=6)


@pytest.mark.parametrize(
    ("line", "record"),
    [
        ("NCCL version 2.19.3+cuda12.3", Version("2.19.3+cuda12.3")),
        ("n:5:5 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", Version("2.21.5+cuda12.4")),
        ("h:1:2 [0] NCCL INFO Using network IB", Network("IB")),
        ("h:1:2 [0] NCCL INFO Using network AWS Libfabric", Network("AWS Libfabric")),
        (
            "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:11.1.128.136<0>",
            NetDevices("IB", ("mlx5_10:1/RoCE", "mlx5_11:1/RoCE")),
        ),
        ("h:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>", NetDevices("Socket", ("eth0:10.0.0.1<0>",))),
        ("h:1:2 [0] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7", Ring(0, (0, 1, 2, 3, 4, 5, 6, 7))),
        ("h:1:2 [0] NCCL INFO Ring 03 :    1   2   3   0", Ring(3, (1, 2, 3, 0))),
        (
            "h:1:2 [0] NCCL INFO Trees [0] 1/2/-1->0->-1 [1] -1/-1/-1->0->1",
            Trees("[0] 1/2/-1->0->-1 [1] -1/-1/-1->0->1"),
        ),
        (
            "h:1:2 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via P2P/direct pointer/read",
            Transport(0, "2[2]", "3[3]", "P2P/direct pointer/read", "both"),
        ),
        (
            "h:1:2 [3] NCCL INFO Channel 00 : 3[3] -> 4[4] via SHM/direct/direct",
            Transport(0, "3[3]", "4[4]", "SHM/direct/direct", "both"),
        ),
        (
            "h:1:2 [3] NCCL INFO Channel 03/0 : 7[3] -> 3[3] [receive] via NET/IBext_v8/3/GDRDMA",
            Transport(3, "7[3]", "3[3]", "NET/IBext_v8/3/GDRDMA", "receive"),
        ),
        (
            "h:1:2 [1] NCCL INFO Ring 00 : 1[23000] -> 8[1e000] [send] via NET/IB/1/GDRDMA",
            Transport(0, "1[23000]", "8[1e000]", "NET/IB/1/GDRDMA", "send"),
        ),
        (
            "h:1:2 [1] NCCL INFO 8 coll channels, 0 collnet channels, 0 nvls channels, 8 p2p channels, 2 p2p channels per peer",
            ChannelCounts(coll=8, collnet=0, nvls=0, p2p=8, p2p_per_peer=2),
        ),
        (
            "h:1:2 [1] NCCL INFO 24 coll channels, 24 p2p channels, 24 p2p channels per peer",
            ChannelCounts(24, None, None, 24, 24),
        ),
        (
            "h:1:2 [1] NCCL INFO comm 0x5a0ca40 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 38000 commId 0xf021d9037f9243d8 - Init COMPLETE",
            InitComplete("0x5a0ca40", 1, 4, 1, 1, "38000", "0xf021d9037f9243d8"),
        ),
        (
            "h:1:2 [1] NCCL INFO comm 0x7f2c rank 1 nranks 16 cudaDev 1 nvmlDev 1 - Init COMPLETE",
            InitComplete("0x7f2c", 1, 16, 1, 1, None, None),
        ),
        (
            "h:1:2 [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x7c1f - Init START",
            InitStart("0x55d0", 0, 4, 0),
        ),
    ],
)
def test_recognised_lines(line: str, record: object) -> None:
    parsed = parse_line(line)
    assert parsed is not None
    assert parsed.record == record


def test_warn_keeps_message_and_source_location() -> None:
    parsed = parse_line(
        "gpu-a12:77120:77388 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
        "11.1.128.141<52144> with status=12 opcode=0 len=0 vendor err 129 (Recv)"
    )
    assert parsed is not None and parsed.prefix is not None and parsed.prefix.pid == 77120
    assert isinstance(parsed.record, Warn)
    assert parsed.record.location == "transport/net_ib.cc:1696"
    assert parsed.record.message.startswith("NET/IB : Got completion from peer 11.1.128.141<52144>")


@pytest.mark.parametrize(
    "line",
    [
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) "
        "ran for 600060 milliseconds before timing out.",
        "[E ProcessGroupNCCL.cpp:475] [PG 0 (default_pg) Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for "
        "600060 milliseconds before timing out.",
    ],
)
def test_pytorch_watchdog_timeout(line: str) -> None:
    parsed = parse_line(line)
    assert parsed is not None and parsed.prefix is None
    rec = parsed.record
    assert isinstance(rec, WatchdogTimeout)
    assert (rec.rank, rec.seq, rec.op, rec.timeout_ms, rec.ran_ms) == (0, 1580, "ALLREDUCE", 600000, 600060)
    assert rec.fields["NumelIn"] == "466119168"


@pytest.mark.parametrize(
    "line",
    [
        "",
        "loss 11.02 step 10",
        "h:1:2 [0] NCCL INFO Connected all rings",
        "h:1:2 [0] NCCL INFO P2P Chunksize set to 524288",
        "h:1:2 [0] NCCL INFO Channel 00/0 : 2[2] -> ",  # cut mid-line by a dying process
        "h:1:2 [0] NCCL INFO NET/IB : No device found.",
        "NCCL INFO \x00\x01\xff garbage [1] -> via",
        "gpu-a12:77120:773",
        "h:notapid:2 [0] NCCL INFO Using network IB",
        "Watchdog caught collective operation timeout: WorkNCCL(",
        "[x" * 5000 + " NCCL WARN",
    ],
)
def test_garbage_is_ignored(line: str) -> None:
    assert parse_line(line) is None


@pytest.mark.parametrize(
    ("via", "kind"),
    [
        ("P2P/CUMEM/read", "P2P"),
        ("P2P/direct pointer/read", "P2P"),
        ("SHM/direct/direct", "SHM"),
        ("NET/IBext_v8/3/GDRDMA", "NET/IB/GDRDMA"),
        ("NET/IB/1", "NET/IB"),
        ("NET/Socket/0", "NET/Socket"),
    ],
)
def test_transport_kind(via: str, kind: str) -> None:
    assert transport_kind(via) == kind
