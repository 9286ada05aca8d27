"""Tracker over realistic multi-rank logs: one report per communicator, faults on warnings and timeouts."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from myolo.agent.nccl.tracker import NcclTracker
from myolo.events.codec import decode, encode
from myolo.events.envelope import new_event
from myolo.events.payloads import NcclReport, NodeFault

LOGS = Path(__file__).parent / "test_nccl_logs"


def _run(name: str, **kw: object) -> list[NcclReport | NodeFault]:
    tracker = NcclTracker("node-1", **kw)  # type: ignore[arg-type]
    out: list[NcclReport | NodeFault] = []
    for i, line in enumerate((LOGS / name).read_text(errors="replace").splitlines()):
        out.extend(tracker.feed(line, now=1000.0 + i))
    return out


def test_single_node_log_gives_one_report_per_rank() -> None:
    out = _run("single_node_4gpu.log")
    reports = [p for p in out if isinstance(p, NcclReport)]
    assert not [p for p in out if isinstance(p, NodeFault)]
    assert [r.rank for r in reports] == [0, 1, 2, 3]
    assert {r.pid for r in reports} == {41873, 41874, 41875, 41876}
    for r in reports:
        assert r.init_complete and r.nranks == 4 and r.nnodes == 1 and r.local_rank == r.rank
        assert r.cuda_dev == r.rank
        assert r.comm_id == "0x7c1f2a9be04d3e11"
        assert r.network == "Socket" and r.net_devices == ["eth0:10.42.0.17<0>"]
        assert r.coll_channels == 2 and r.p2p_channels == 2
    r0, r1, r2, r3 = reports
    assert r0.version == "2.21.5+cuda12.4"  # printed by pid 41873 only
    assert r1.version is None
    assert r0.rings == ["00: 0 1 2 3", "01: 0 1 2 3"]
    assert r0.trees == ["[0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1"]
    assert r0.transports == ["P2P"] and r2.transports == ["SHM"]
    assert [(c.channel, c.src, c.dst) for c in r0.channels] == [(0, "0[0]", "1[1]"), (1, "0[0]", "1[1]")]
    # rank 1's tree connection back to rank 0 comes after "Connected all rings" and still belongs to it
    assert [(c.channel, c.dst) for c in r1.channels] == [(0, "2[2]"), (1, "2[2]"), (0, "0[0]")]
    assert r3.channels[0].transport == "SHM/direct/direct"


def test_two_node_ib_report_then_warning_then_watchdog() -> None:
    out = _run("two_node_ib_rank3.log", pid=77120)
    assert [type(p).__name__ for p in out] == ["NcclReport", "NodeFault", "NodeFault"]
    report, warn, timeout = out
    assert isinstance(report, NcclReport) and isinstance(warn, NodeFault) and isinstance(timeout, NodeFault)
    assert (report.rank, report.nranks, report.nnodes, report.local_rank) == (3, 16, 2, 3)
    assert report.version == "2.19.3+cuda12.3"  # the bare version line
    assert report.network == "IB" and report.algo == "Ring,Tree"  # NCCL_ALGO as NCCL read it
    assert report.net_devices == ["mlx5_10:1/RoCE", "mlx5_11:1/RoCE"]
    assert report.transports == ["NET/IB/GDRDMA", "P2P"]
    directions = {(c.channel, c.direction) for c in report.channels if c.transport.startswith("NET/")}
    assert directions == {(2, "receive"), (3, "receive"), (2, "send"), (3, "send")}
    assert report.trees[0].startswith("[0] 4/-1/-1->3->2")
    assert report.coll_channels == 4
    # the second, identical warning a moment later is folded into the first
    assert warn.kind == "nccl_warn" and warn.health == "warn" and warn.gpu_index == 3
    assert "vendor err 129" in (warn.message or "")
    assert any("transport/net_ib.cc:1696" in r for r in warn.reasons)
    assert timeout.kind == "nccl_timeout" and timeout.health == "fail" and timeout.gpu_index == 3
    assert "ALLREDUCE SeqNum=1580 ran 600060 ms (timeout 600000 ms)" in timeout.reasons[0]
    assert "pid 77120" in timeout.reasons


def test_legacy_ring_format_without_comm_line() -> None:
    (report,) = _run("legacy_ring.log")
    assert isinstance(report, NcclReport)
    assert report.version == "2.4.8+cuda10.1"
    assert report.rank == 1 and report.nranks == 16 and report.nnodes is None
    assert report.rings == ["00: 1 2 3 0"]
    assert report.transports == ["NET/IB/GDRDMA", "P2P"]
    assert report.net_devices == ["mlx5_0:1/IB"]  # the later NET/IB line replaces NET/Socket


def test_repeated_warning_is_folded_then_reported_with_count() -> None:
    tracker = NcclTracker("n", warn_repeat_s=60)
    line = "h:9:9 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<4321> failed : Connection refused"
    first = tracker.feed(line, now=0.0)
    folded = [tracker.feed(line, now=t) for t in (1.0, 30.0, 59.0)]
    again = tracker.feed(line, now=61.0)
    other = tracker.feed(line.replace("Connection refused", "No route to host"), now=61.5)
    assert len(first) == 1 and folded == [[], [], []]
    assert len(again) == 1 and any("3 identical warnings" in r for r in again[0].reasons)
    assert len(other) == 1


def test_second_communicator_on_same_device_gets_its_own_report() -> None:
    lines = [
        "h:7:8 [0] NCCL INFO comm 0xa rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "h:7:8 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
        "h:7:8 [0] NCCL INFO comm 0xa rank 0 nranks 2 cudaDev 0 nvmlDev 4 busId 9a000 commId 0x1 - Init COMPLETE",
        "h:7:9 [0] NCCL INFO Channel 01/1 : 0[0] -> 1[1] via P2P/CUMEM/read",  # lazy p2p of comm 0xa
        "h:7:8 [0] NCCL INFO comm 0xb rank 1 nRanks 4 nNodes 1 localRanks 4 localRank 1 MNNVL 0",
        "h:7:8 [0] NCCL INFO Channel 00 : 1[0] -> 2[2] via SHM/direct/direct",
        "h:7:8 [0] NCCL INFO comm 0xb rank 1 nranks 4 cudaDev 0 nvmlDev 4 busId 9a000 commId 0x2 - Init COMPLETE",
    ]
    a, b = NcclTracker("n").feed_many(lines, now=0.0)
    assert isinstance(a, NcclReport) and isinstance(b, NcclReport)
    assert (a.comm_id, a.transports, len(a.channels)) == ("0x1", ["P2P"], 1)
    assert (b.comm_id, b.rank, b.nranks, b.transports) == ("0x2", 1, 4, ["SHM"])


def test_garbage_stream_never_raises() -> None:
    import random

    rng = random.Random(7)
    alphabet = "NCCL INFO WARN Channel Ring comm rank nranks [0] -> via : / 0x1f 12 \t\x00é" + "h:1:2 "
    tracker = NcclTracker("n")
    for _ in range(3000):
        line = "".join(rng.choice(alphabet.split(" ")) + rng.choice(" :/[]") for _ in range(rng.randint(0, 30)))
        tracker.feed(line, now=0.0)
    assert tracker.lines == 3000


def test_payloads_survive_the_event_codec() -> None:
    for payload in _run("two_node_ib_rank3.log", pid=77120):
        key, value, headers = encode(new_event(payload, source="agent/node-1"))
        event = decode(value, headers, key)
        assert msgspec.to_builtins(event.data) == msgspec.to_builtins(payload)  # type: ignore[union-attr]


def test_bad_option_is_named() -> None:
    with pytest.raises(ValueError, match="warn_repeat_s"):
        NcclTracker("n", warn_repeat_s=-1)


def test_a_workers_log_names_its_job_and_generation_in_every_report() -> None:
    from myolo.agent.daemon.watchers import log_owner

    workers = Path("/var/lib/myolo/agent/workers")
    assert log_owner(workers / "gpt-7b" / "g12" / "nccl-rank-3.log", workers) == ("gpt-7b", 12)
    assert log_owner(Path("/var/log/torchrun/nccl.log"), workers) == (None, None)  # a configured glob's
    assert log_owner(workers / "gpt-7b" / "gx" / "nccl-rank-3.log", workers) == (None, None)
    tracker = NcclTracker("node-a", job_id="gpt-7b", generation=12)
    out = [p for line in (LOGS / "single_node_4gpu.log").read_text().splitlines() for p in tracker.feed(line, 0.0)]
    reports = [p for p in out if isinstance(p, NcclReport)]
    assert len(reports) == 4 and {(r.job_id, r.generation) for r in reports} == {("gpt-7b", 12)}
