"""The cuda, tfrecord and rdma rows of a pre-flight, from the agents' answers (the simulated agents answer as the
real ones do: tests/support/coordinator/preflight_sim.py)."""

from __future__ import annotations

import msgspec
import pytest

from myolo.agent.tfrecord.check import frame
from myolo.coordinator.preflight import cuda
from myolo.coordinator.preflight.rdma import NO_PAIR
from myolo.coordinator.preflight.records import CheckResult, PreflightReport, PreflightRequest
from myolo.events.payloads.commands import CheckTfrecordsArgs, RuntimeVersions
from tests.support.coordinator.preflight_sim import GOOD_VERSIONS, PreflightSim, job_manifest

SHARDS = "/srv/data/train-*.tfrecord"


@pytest.fixture
async def sim(tmp_path):
    s = PreflightSim(tmp_path)
    await s.start()
    yield s
    await s.close()


def rows(report: PreflightReport, check: str) -> list[CheckResult]:
    return [r for r in report.results if r.check == check]


def shard(i: int, n: int = 10) -> bytes:
    return b"".join(frame(f"shard {i} example {j}".encode()) for j in range(n))


# ---- tfrecord ---------------------------------------------------------------------------------------------


async def test_tfrecord_files_are_checked_on_each_node_and_the_first_bad_offset_named(sim: PreflightSim) -> None:
    for node in ("n1", "n2"):
        sim.files[node].update({f"/srv/data/train-{i}.tfrecord": shard(i) for i in range(2)})
    bad = bytearray(shard(1))
    at = 3 * len(frame(b"shard 1 example 0"))  # the fourth record's header
    bad[at + 20] ^= 0xFF  # in its data
    sim.files["n2"]["/srv/data/train-1.tfrecord"] = bytes(bad)
    await sim.running_job(job_manifest(path=SHARDS))
    report = await sim.run(PreflightRequest(checks=["tfrecord"]))
    good, broken = rows(report, "tfrecord")
    assert (good.node_id, good.verdict, good.value) == ("n1", "PASS", f"2 file(s), 20 records, {2 * 10 * 17} bytes")
    assert good.subject == f"job/tiny {SHARDS}" and good.threshold == "every record's length and masked CRC-32C"
    assert (broken.node_id, broken.verdict) == ("n2", "FAIL")
    assert f"/srv/data/train-1.tfrecord: record 3 at byte {at}: the data's CRC does not match" in broken.reason
    assert "copy the files again" in broken.reason
    (sent,) = {msgspec.convert(c.args, CheckTfrecordsArgs).paths[0] for c in sim.sent("check_tfrecords")}
    assert sent == SHARDS


@pytest.mark.parametrize(
    ("path", "verdict", "words"),
    [
        ("/srv/data/train.bin", "SKIP", "no job on this node reads TFRecord files (a dataPath naming *.tfrecord)"),
        ("/srv/data/x.tfrecord.gz", "SKIP", "compressed TFRecord files"),
        ("data/x.tfrecord", "SKIP", "dataPath is relative"),
        ("/srv/data/none-*.tfrecord", "FAIL", "/srv/data/none-*.tfrecord on n1: no file matches it on this node"),
    ],
)
async def test_what_cannot_be_checked_says_why(sim: PreflightSim, path: str, verdict: str, words: str) -> None:
    await sim.running_job(job_manifest(path=path))
    report = await sim.run(PreflightRequest(checks=["tfrecord"], nodes=["n1"]))
    (row,) = rows(report, "tfrecord")
    assert row.verdict == verdict and words in row.reason, row
    assert bool(sim.sent("check_tfrecords")) is (verdict == "FAIL")


async def test_an_agent_that_does_not_know_the_action_fails_the_row_saying_so(sim: PreflightSim) -> None:
    await sim.running_job(job_manifest(path=SHARDS))
    sim.refuse["n1"] = "action 'check_tfrecords' is not supported by this agent (supported: hash_files)"
    report = await sim.run(PreflightRequest(checks=["tfrecord"], nodes=["n1"]))
    (row,) = rows(report, "tfrecord")
    assert (
        row.verdict == "FAIL"
        and "check_tfrecords rejected on n1: action 'check_tfrecords' is not supported" in row.reason
    )


# ---- cuda -------------------------------------------------------------------------------------------------


async def test_cuda_rows_name_each_nodes_mismatch(sim: PreflightSim) -> None:
    sim.versions["n2"] = RuntimeVersions(**{**GOOD_VERSIONS, "cuda": "12.4", "driver_cuda": "11.8"})
    report = await sim.run(PreflightRequest(checks=["cuda"]))
    ok, old = rows(report, "cuda")
    assert (ok.verdict, ok.value) == (
        "PASS",
        "torch 2.4.0, CUDA 12.4, cuDNN 9.1.0; driver 550.54.15 supports CUDA 12.4",
    )
    assert old.verdict == "FAIL" and "needs a driver for CUDA 12.x; this driver supports 11.8" in old.reason
    assert "upgrade the driver on n2" in old.reason
    report = await sim.run(PreflightRequest(checks=["cuda"], nodes=["n1"], min_cuda="12.6", min_cudnn="9.0"))
    (row,) = rows(report, "cuda")
    assert row.verdict == "FAIL" and "CUDA 12.4 is older than the 12.6 required" in row.reason
    assert row.threshold == "CUDA <= the driver's, CUDA >= 12.6, cuDNN >= 9.0"
    assert report.thresholds.min_cuda == "12.6"


@pytest.mark.parametrize(
    ("change", "verdict", "words"),
    [
        ({"cuda": None, "cudnn": None, "torch": "2.4.0+cpu"}, "SKIP", "CPU build"),
        ({"simulated": True, "driver_cuda": "12.4"}, "SKIP", "simulated GPUs"),
        ({"cuda": "12.6"}, "PASS", "minor-version compatibility"),
        ({"cudnn": "8.6.0"}, "PASS", "runs on the driver's CUDA 12.4"),
        ({"error": "the trainer's interpreter did not answer within 120 s"}, "FAIL", "could not say"),
        ({"driver_cuda": None}, "FAIL", "no CUDA version"),
    ],
)
def test_the_cuda_judgement(change: dict, verdict: str, words: str) -> None:
    row = cuda.judge("n1", RuntimeVersions(**{**GOOD_VERSIONS, **change}), None, None)
    assert row.verdict == verdict and words in row.reason, row
    assert cuda.judge("n1", RuntimeVersions(**{**GOOD_VERSIONS, "cudnn": "8.6.0"}), None, "8.9").verdict == "FAIL"


# ---- rdma -------------------------------------------------------------------------------------------------


async def test_rdma_is_measured_between_two_nodes_of_a_job(sim: PreflightSim) -> None:
    await sim.running_job(job_manifest())
    sim.rdma_us.update(n1=1.3, n2=1.3)
    report = await sim.run(PreflightRequest(checks=["rdma"], max_rdma_latency_us=5))
    assert [(r.node_id, r.verdict, r.subject) for r in rows(report, "rdma")] == [
        ("n1", "PASS", "job/tiny n1 <-> n2"),
        ("n2", "PASS", "job/tiny n1 <-> n2"),
    ]
    server, client = sim.sent("rdma_latency")
    assert (server.node_id, server.args["role"], client.node_id) == ("n1", "server", "n2")
    assert (client.args["role"], client.args["peer"]) == ("client", "n1.lan")  # the server's address
    assert rows(report, "rdma")[0].value == "1.30 us typical, 1.33 us average (2 bytes, ib_write_lat)"
    sim.rdma_us["n2"] = 25.0
    report = await sim.run(PreflightRequest(checks=["rdma"], max_rdma_latency_us=5))
    assert {r.verdict for r in rows(report, "rdma")} == {"FAIL"}
    assert "25.00 us is over 5 us" in rows(report, "rdma")[0].reason


async def test_rdma_skips_without_ib_write_lat_or_without_a_peer(sim: PreflightSim) -> None:
    report = await sim.run(PreflightRequest(checks=["rdma"]))
    assert [(r.verdict, r.reason) for r in rows(report, "rdma")] == [("SKIP", NO_PAIR)] * 2
    await sim.running_job(job_manifest())
    report = await sim.run(PreflightRequest(checks=["rdma"]))
    assert [(r.verdict, r.reason) for r in rows(report, "rdma")] == [
        ("SKIP", "n1: ib_write_lat is not installed on this node")
    ] * 2
    assert [c.args["role"] for c in sim.sent("rdma_latency")] == ["server"]  # no client without a server
