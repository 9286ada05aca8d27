"""``ib_write_lat``'s report read into numbers; the action says when the tool is absent instead of failing, and
bounds a run that never ends (a fake ib_write_lat stands in for perftest)."""

from __future__ import annotations

import stat
from pathlib import Path

from myolo.agent.rdma.action import argv, run
from myolo.agent.rdma.parse import parse_report
from myolo.events.payloads.commands import RdmaLatencyArgs, action_args

REPORT = """\
---------------------------------------------------------------------------------------
                    RDMA_Write Latency Test
 Dual-port       : OFF		Device         : mlx5_0
 Number of qps   : 1		Transport type : IB
 Connection type : RC		Using SRQ      : OFF
 TX depth        : 1
 Mtu             : 4096[B]
 Link type       : IB
 Max inline data : 220[B]
 rdma_cm QPs	 : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 local address: LID 0x12 QPN 0x0a3c PSN 0x6c1bd2 RKey 0x1fff00 VAddr 0x007f8a5c9e5000
 remote address: LID 0x0f QPN 0x0b1d PSN 0x3a0a4e RKey 0x1fff00 VAddr 0x007fb3b8f66000
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 2       1000          1.02           4.56         1.06     	       1.08        	0.10   		1.35    		4.56
---------------------------------------------------------------------------------------
"""


def test_the_report_reads_as_latencies() -> None:
    found = parse_report(REPORT)
    assert found is not None
    assert (found.size, found.iterations, found.t_typical_us, found.t_avg_us, found.t_max_us) == (
        2,
        1000,
        1.06,
        1.08,
        4.56,
    )
    assert parse_report("") is None and parse_report(REPORT.replace(" 2       1000", " x 1000")) is None


def test_the_client_is_told_its_peer_and_a_server_none() -> None:
    args = action_args("rdma_latency", {"role": "client", "peer": "10.0.0.2", "device": "mlx5_0"})
    assert argv("ib_write_lat", args) == [
        "ib_write_lat",
        "-p",
        "18515",
        "-s",
        "2",
        "-n",
        "1000",
        "-d",
        "mlx5_0",
        "10.0.0.2",
    ]
    for bad in ({"role": "client"}, {"role": "server", "peer": "10.0.0.2"}):
        try:
            action_args("rdma_latency", bad)
        except Exception as exc:
            assert "peer" in str(exc.field)  # type: ignore[attr-defined]
        else:
            raise AssertionError(bad)


async def test_no_tool_is_an_answer_not_a_failure() -> None:
    found = await run(RdmaLatencyArgs(role="server"), which=lambda _: None)
    assert not found.available and "not installed" in (found.reason or "")


def fake_tool(tmp_path: Path, body: str) -> str:
    tool = tmp_path / "ib_write_lat"
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return str(tool)


async def test_a_run_reports_what_the_tool_measured(tmp_path: Path) -> None:
    (tmp_path / "report.txt").write_text(REPORT)
    tool = fake_tool(tmp_path, f"cat {tmp_path / 'report.txt'}\n")
    found = await run(RdmaLatencyArgs(role="client", peer="10.0.0.2"), which=lambda _: tool)
    assert (found.available, found.t_typical_us, found.error) == (True, 1.06, None)


async def test_a_server_nobody_reaches_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    tool = fake_tool(tmp_path, "exec sleep 30\n")
    found = await run(RdmaLatencyArgs(role="server", timeout_s=1.0), which=lambda _: tool)
    assert found.error is not None and "no client connected" in found.error


async def test_a_failed_run_says_what_the_tool_said(tmp_path: Path) -> None:
    tool = fake_tool(tmp_path, 'echo "Couldn\x27t connect to 10.0.0.2:18515"; exit 1\n')
    found = await run(RdmaLatencyArgs(role="client", peer="10.0.0.2"), which=lambda _: tool)
    assert found.error is not None and "exited 1" in found.error and "Couldn't connect" in found.error
