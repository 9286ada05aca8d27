"""The preflight component on a real (offline) coordinator: each check's verdict from the fleet view and from the
agents' answers to signed hash_files and nccl_probe commands, waiting bounded on the coordinator's clock."""

from __future__ import annotations

import asyncio
import json

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from myolo.agent.commands.hash_files import hash_files_action
from myolo.agent.commands.probe import summary
from myolo.coordinator.api import openapi
from myolo.coordinator.api.app import create_app
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.errors import NotLeader
from myolo.coordinator.preflight.checks import version_tuple
from myolo.coordinator.preflight.interface import PreflightRefused, UnknownPreflightNode
from myolo.coordinator.preflight.records import CHECKS, CheckResult, PreflightReport, PreflightRequest
from myolo.events.payloads import BandwidthPoint, BandwidthReport
from myolo.events.payloads.commands import FileDigest, HashFilesArgs, HashFilesResult, NcclProbeArgs, NcclProbeResult
from tests.support.api_auth import OPERATOR, VIEWER, bearer, security
from tests.support.coordinator.preflight_sim import DATA, PreflightSim, job_manifest, sha
from tests.unit.coordinator.api.test_openapi import _declared_properties, _response_schema, check

PATH = "/srv/data/train.bin"


@pytest.fixture
async def sim(tmp_path):
    s = PreflightSim(tmp_path)
    await s.start()
    yield s
    await s.close()


def rows(report: PreflightReport, check_name: str | None = None) -> list[CheckResult]:
    return [r for r in report.results if check_name in (None, r.check)]


def verdicts(report: PreflightReport) -> list[tuple[str, str, str]]:
    return [(r.node_id, r.check, r.verdict) for r in report.results]


async def test_every_check_passes_on_a_healthy_fleet_with_the_recorded_data(sim: PreflightSim) -> None:
    await sim.running_job(job_manifest(digest=sha(DATA)))
    assert sorted(sim.job().status.generation.node_ids) == ["n1", "n2"]
    sim.rdma_us.update(n1=1.1, n2=1.1)
    report = await sim.run(PreflightRequest(min_busbw_gbps=10))
    expected = [(n, c, "SKIP" if c == "tfrecord" else "PASS") for n in ("n1", "n2") for c in CHECKS]
    assert verdicts(report) == expected, report.results
    assert (report.ok, report.passed, report.failed, report.skipped) == (True, 12, 0, 2)
    assert report.nodes == ["n1", "n2"] and report.epoch == 3 and report.by == "operator:alice"
    driver, memory, _, data, _, nccl, _ = rows(report)[:7]
    assert (driver.value, driver.threshold) == ("550.54.15 (sim)", ">= 515.65.01")
    assert "simulated GPUs" in driver.reason
    assert memory.value == "50.0% free (GPU 0: 40.0 of 80.0 GiB)" and memory.threshold == ">= 10% free"
    assert data.subject == f"job/tiny {PATH}" and data.value == f"sha256 {sha(DATA)} ({len(DATA)} bytes)"
    assert nccl.value.startswith("20.00 GB/s busbw (nccl, 2 ranks") and nccl.threshold == ">= 10 GB/s"
    # one signed command of each kind per node, with arguments the agents accept
    hashes, probes = sim.sent("hash_files"), sim.sent("nccl_probe")
    assert sorted(c.node_id for c in hashes) == ["n1", "n2"] == sorted(c.node_id for c in probes)
    assert msgspec.convert(hashes[0].args, HashFilesArgs) == HashFilesArgs(paths=[PATH], max_bytes=1 << 40)
    assert msgspec.convert(probes[0].args, NcclProbeArgs).world_size == 2
    assert {data.command_id, nccl.command_id} <= {c.command_id for c in hashes + probes}
    assert sim.preflight.stats() == {"preflight_runs": 1, "preflight_failed_runs": 0}
    assert sim.preflight.status()["preflight_last"]["ok"] is True


async def test_a_wrong_digest_fails_naming_the_node_and_the_file(sim: PreflightSim) -> None:
    await sim.running_job(job_manifest(digest=sha(DATA)))
    sim.files["n2"][PATH] = DATA + b"changed"
    report = await sim.run(PreflightRequest(checks=["data"]))
    assert not report.ok and verdicts(report) == [("n1", "data", "PASS"), ("n2", "data", "FAIL")]
    bad = rows(report)[1]
    assert f"{PATH} on n2 hashes to {sha(DATA + b'changed')}, not the {sha(DATA)} job tiny recorded" in bad.reason
    assert bad.threshold == f"sha256 {sha(DATA)}" and bad.subject == f"job/tiny {PATH}"
    assert sim.sent("nccl_probe") == []  # only the checks asked for


async def test_a_missing_file_fails_with_the_agents_reason(sim: PreflightSim) -> None:
    await sim.running_job(job_manifest(digest=sha(DATA)))
    del sim.files["n1"][PATH]
    report = await sim.run(PreflightRequest(checks=["data"]))
    assert verdicts(report) == [("n1", "data", "FAIL"), ("n2", "data", "PASS")]
    assert rows(report)[0].reason == f"{PATH} on n1: cannot read it: No such file or directory"


async def test_nothing_to_hash_is_a_skip_with_the_reason(sim: PreflightSim) -> None:
    await sim.jobs.apply(job_manifest(), "alice")  # no dataSha256
    await sim.second()
    await sim.run_generation()
    report = await sim.run(PreflightRequest(checks=["data"]))
    assert verdicts(report) == [("n1", "data", "SKIP"), ("n2", "data", "SKIP")]
    assert rows(report)[0].reason == "the job recorded no dataSha256" and rows(report)[0].subject == f"job/tiny {PATH}"
    assert report.ok and report.skipped == 2 and sim.sent("hash_files") == []


async def test_a_node_without_jobs_and_a_relative_path_are_skips(tmp_path) -> None:
    sim = PreflightSim(tmp_path, nodes=("n1",))
    await sim.start()
    report = await sim.run(PreflightRequest(checks=["data"]))
    assert [(r.verdict, r.reason) for r in report.results] == [("SKIP", "no job runs on this node")]
    await sim.running_job(job_manifest(path="data/train.bin", digest=sha(DATA)))
    report = await sim.run(PreflightRequest(checks=["data"]))
    assert [r.verdict for r in report.results] == ["SKIP"] and "dataPath is relative" in report.results[0].reason
    await sim.close()


async def test_an_old_driver_a_full_gpu_and_a_slow_link_fail_with_what_was_found(sim: PreflightSim) -> None:
    sim.driver["n1"] = "470.182.03"
    sim.used_pct["n2"] = [50.0, 95.5]
    sim.busbw["n2"] = 3.5
    await sim.second()
    report = await sim.run(PreflightRequest(checks=["driver", "memory", "nccl"], min_busbw_gbps=10))
    assert verdicts(report) == [
        ("n1", "driver", "FAIL"),
        ("n1", "memory", "PASS"),
        ("n1", "nccl", "PASS"),
        ("n2", "driver", "PASS"),
        ("n2", "memory", "FAIL"),
        ("n2", "nccl", "FAIL"),
    ]
    driver, memory, nccl = rows(report, "driver")[0], rows(report, "memory")[1], rows(report, "nccl")[1]
    assert driver.value == "470.182.03" and "older than 515.65.01 (CUDA 11.7" in driver.reason
    assert memory.value == "4.5% free (GPU 1: 3.6 of 80.0 GiB)" and "less than 10% free on GPU 1 4.5%" in memory.reason
    assert nccl.value.startswith("3.50 GB/s") and "below 10 GB/s" in nccl.reason
    assert (report.ok, report.failed) == (False, 3)


async def test_thresholds_come_from_the_request(sim: PreflightSim) -> None:
    report = await sim.run(PreflightRequest(checks=["driver", "memory"], min_driver="555", min_free_memory_pct=60))
    assert [r.verdict for r in report.results] == ["FAIL", "FAIL", "FAIL", "FAIL"]
    assert report.thresholds.min_driver == "555" and report.thresholds.min_free_memory_pct == 60
    assert sim.sent("hash_files") == [] and sim.sent("nccl_probe") == []


async def test_a_node_that_does_not_answer_fails_after_the_timeout_and_a_refusal_is_named(sim: PreflightSim) -> None:
    await sim.running_job(job_manifest(digest=sha(DATA)))
    sim.silent.add("n1")
    sim.refuse["n2"] = "action 'hash_files' is not supported by this agent (supported: drain)"
    started = sim.clock.monotonic()
    report = await sim.run(PreflightRequest(checks=["data", "nccl"], timeout_s=5))
    assert sim.clock.monotonic() - started == pytest.approx(5.0, abs=0.5)  # the coordinator's clock, not the wall's
    assert verdicts(report) == [
        ("n1", "data", "FAIL"),
        ("n1", "nccl", "FAIL"),
        ("n2", "data", "FAIL"),
        ("n2", "nccl", "FAIL"),
    ]
    assert rows(report)[0].reason == "no answer within 5 s: the node's agent did not take hash_files (is it running?)"
    assert rows(report)[0].subject == f"job/tiny {PATH}" and rows(report)[0].command_id is not None
    assert rows(report)[2].reason.startswith("hash_files rejected on n2: action 'hash_files' is not supported")


async def test_a_lost_node_fails_every_check_without_being_asked(tmp_path) -> None:
    sim = PreflightSim(tmp_path, MYOLO_FLEET_LOST_AFTER_S="10")
    await sim.start()
    sim.dead.add("n2")
    await sim.second(20)
    assert sim.fleet.node("n2").liveness == "Lost"
    everyone = await sim.run(PreflightRequest(checks=["driver"]))
    assert everyone.nodes == ["n1"]  # by default: the Ready nodes
    report = await sim.run(PreflightRequest(nodes=["n2"]))
    assert [r.verdict for r in report.results] == ["FAIL"] * len(CHECKS)
    assert "the node is Lost (last sample" in report.results[0].reason
    assert sim.sent("nccl_probe") == []
    await sim.close()


async def test_unknown_nodes_and_a_second_run_at_once_are_refused(sim: PreflightSim) -> None:
    with pytest.raises(UnknownPreflightNode) as err:
        await sim.preflight.preflight(PreflightRequest(nodes=["n1", "zz"]), "operator:alice")
    assert err.value.field == "nodes[1]"
    sim.silent.update({"n1", "n2"})
    first = asyncio.create_task(sim.preflight.preflight(PreflightRequest(checks=["nccl"], timeout_s=2), "operator:a"))
    await asyncio.sleep(0)
    with pytest.raises(PreflightRefused, match="a pre-flight started by operator:a is running"):
        await sim.preflight.preflight(PreflightRequest(), "operator:b")
    while not first.done():
        await sim.clock.advance(0.5)
    assert not first.result().ok


async def test_a_standby_runs_none(tmp_path) -> None:
    standby = PreflightSim(tmp_path)  # never leads
    with pytest.raises(NotLeader):
        await standby.preflight.preflight(PreflightRequest(), "operator:alice")
    assert standby.sent() == []


def test_driver_versions_read_as_numbers() -> None:
    assert version_tuple("550.54.15 (sim)") == (550, 54, 15)
    assert version_tuple("515.65.01") == (515, 65, 1)
    assert version_tuple("sim") is None
    assert version_tuple("535") == (535,)


# ---- the route -------------------------------------------------------------------------------------------------
@pytest.fixture
async def client(sim: PreflightSim) -> TestClient:
    parts = [p for p in (c.api() for c in sim.coord.peers) if p is not None]
    client = TestClient(TestServer(create_app(sim.coord, parts, security())), headers=bearer(OPERATOR))
    await client.start_server()
    yield client
    await client.close()


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"checks": ["driver"]}, 200, None),
        (None, 200, None),
        ({"checks": ["gpu"]}, 400, "checks[0]"),
        ({"min_free_memory_pct": 150}, 400, "min_free_memory_pct"),
        ({"min_driver": "latest"}, 400, "min_driver"),
        ({"by": "mallory"}, 400, "by"),
        ({"nodes": ["n1", "nope"]}, 404, "nodes[1]"),
    ],
)
async def test_the_route_answers_fit_the_document(
    client: TestClient, sim: PreflightSim, body, status: int, field
) -> None:
    if body is None:  # every default, every check: the agents must answer while the request waits
        sim.used_pct = {}
        req = asyncio.create_task(client.post("/v1/preflight", data=b"", headers={"Content-Type": "application/json"}))
        while not req.done():
            await sim.agents()
            await sim.clock.advance(0.25)
            await asyncio.sleep(0.001)
        resp = req.result()
    else:
        resp = await client.post("/v1/preflight", json=body)
    answer = await resp.json()
    assert resp.status == status, answer
    assert answer.get("field") == field
    doc = openapi.for_components(COMPONENTS)
    assert check(doc, _response_schema(doc, "/v1/preflight", "post", status), answer) == []
    if status == 200:
        assert _declared_properties(doc, doc["components"]["schemas"]["PreflightReport"]) == set(answer)
        for row in answer["results"]:
            assert _declared_properties(doc, doc["components"]["schemas"]["PreflightCheck"]) == set(row)


async def test_a_viewer_may_not_run_it(client: TestClient) -> None:
    resp = await client.post("/v1/preflight", json={}, headers=bearer(VIEWER))
    assert resp.status == 403


async def test_the_agents_real_answers_read_as_the_preflight_expects(tmp_path) -> None:
    """A hash_files and an nccl_probe result as they travel in an ack: what the agent's code writes is what the
    coordinator reads, through the one result Struct of each action."""
    path = tmp_path / "train.bin"
    path.write_bytes(DATA)
    answer = await hash_files_action()(HashFilesArgs(paths=[str(path), str(tmp_path)], max_bytes=1 << 20))
    digests = msgspec.convert(json.loads(json.dumps(answer)), HashFilesResult)
    assert digests[str(path)] == FileDigest(sha256=sha(DATA), size=len(DATA))
    assert (digests[str(tmp_path)].error or "").startswith("refused: a directory")
    point = BandwidthPoint(size_bytes=1 << 20, time_s=0.001, algbw_gbps=1.05, busbw_gbps=1.05)
    report = BandwidthReport(node_id="n1", backend="gloo", world_size=2, points=[point])
    wire = json.loads(msgspec.json.encode(summary(report)))
    assert msgspec.convert(wire, NcclProbeResult).peak_busbw_gbps == 1.05


async def test_a_leader_deposed_during_a_run_answers_not_leader(sim: PreflightSim) -> None:
    """Its acks stopped counting when it stepped down: no report from it; the caller asks the new leader."""
    sim.silent.update({"n1", "n2"})
    run = asyncio.create_task(sim.preflight.preflight(PreflightRequest(checks=["nccl"], timeout_s=2), "operator:a"))
    await sim.clock.advance(0.5)
    sim.coord._end_term()
    while not run.done():
        await sim.clock.advance(0.5)
    with pytest.raises(NotLeader):
        run.result()
    assert sim.preflight.runs == 0
