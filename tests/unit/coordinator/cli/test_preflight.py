"""`myoloctl preflight` against a leading coordinator's real API on a real port (no broker: its writes are
recorded), run in a thread while the test's event loop serves it and plays the agents and the clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from typer.testing import CliRunner, Result

from myolo.coordinator.api.app import create_app
from myolo.coordinator.cli.main import app
from myolo.coordinator.preflight.records import CHECKS
from tests.support.api_auth import OPERATOR, security, token
from tests.support.coordinator.preflight_sim import DATA, PreflightSim, job_manifest, sha

PATH = "/srv/data/train.bin"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[PreflightSim, str]]:
    sim = PreflightSim(tmp_path)
    await sim.start()
    await sim.running_job(job_manifest(digest=sha(DATA)))
    parts = [p for p in (c.api() for c in sim.coord.peers) if p is not None]
    server = TestServer(create_app(sim.coord, parts, security()))
    await server.start_server()
    yield sim, str(server.make_url("")).rstrip("/")
    await server.close()
    await sim.close()


async def myoloctl(served: tuple[PreflightSim, str], *args: str) -> Result:
    """The CLI in a thread; meanwhile the agents answer and the coordinator's clock moves (a quarter second a
    turn), so the run's wait ends on simulated time."""
    sim, url = served
    env = {"MYOLO_TOKEN": token(OPERATOR), "MYOLO_API": "", "COLUMNS": "250"}
    done = asyncio.ensure_future(asyncio.to_thread(CliRunner().invoke, app, [*args, "--api", url], env=env))
    for _ in range(20_000):
        if done.done():
            break
        await sim.agents()
        await sim.clock.advance(0.25)
        await asyncio.sleep(0.001)  # hands the loop to the server's sockets; no timing rides on it
    return await done


def lines_with(output: str, *words: str) -> list[str]:
    return [line for line in output.splitlines() if all(w in line for w in words)]


async def test_a_ready_fleet_passes_every_check_and_exits_0(served) -> None:
    done = await myoloctl(served, "preflight")
    assert done.exit_code == 0, done.output
    for node in ("n1", "n2"):
        assert lines_with(done.output, node, "driver", "550.54.15 (sim)", ">= 515.65.01", "PASS")
        assert lines_with(done.output, node, "memory", "50.0% free", ">= 10% free", "PASS")
        assert lines_with(
            done.output, node, f"data job/tiny {PATH}", f"sha256 {sha(DATA)[:12]}… ({len(DATA)} bytes)", "PASS"
        )
        assert lines_with(done.output, node, "nccl", "20.00 GB/s busbw", ">= 10 GB/s", "PASS")
        assert lines_with(done.output, node, "cuda", "CUDA 12.4", "PASS")
        assert lines_with(done.output, node, "tfrecord", "SKIP", "no job on this node reads TFRecord files")
        assert lines_with(done.output, node, "rdma job/tiny n1 <-> n2", "SKIP", "ib_write_lat is not installed")
    assert "ready: 10 passed, 0 failed, 4 skipped on 2 node(s)" in done.output
    assert "run by operator:" in done.output and "(epoch 3)" in done.output


async def test_a_changed_data_file_exits_1_naming_the_node_and_the_file(served) -> None:
    sim, _ = served
    sim.files["n2"][PATH] = b"other bytes"
    done = await myoloctl(served, "preflight", "--skip", "nccl", "--skip", "rdma", "--skip", "tfrecord")
    assert done.exit_code == 1, done.output
    (bad,) = lines_with(done.output, "FAIL")
    assert bad.startswith("n2") and f"{PATH} on n2 hashes to {sha(b'other bytes')}" in bad
    assert "NOT ready: 7 passed, 1 failed, 0 skipped" in done.output
    assert sim.sent("nccl_probe") == []


async def test_thresholds_and_nodes_are_the_options(served) -> None:
    sim, _ = served
    sim.busbw["n1"] = 12.0
    done = await myoloctl(served, "preflight", "n1", "--only", "nccl", "--min-busbw", "15")
    assert done.exit_code == 1
    assert lines_with(done.output, "n1", "nccl", "12.00 GB/s", ">= 15 GB/s", "FAIL", "below 15 GB/s")
    assert [c.node_id for c in sim.sent("nccl_probe")] == ["n1"]
    done = await myoloctl(served, "preflight", "--only", "driver", "--min-driver", "560.1")
    assert done.exit_code == 1 and len(lines_with(done.output, "older than 560.1")) == 2


async def test_json_output_is_the_report(served) -> None:
    done = await myoloctl(served, "preflight", "--only", "memory", "-o", "json")
    assert done.exit_code == 0, done.output
    body = json.loads(done.output[done.output.index("{") :])  # after the server's own log lines (one process)
    assert body["ok"] is True and [(r["node_id"], r["verdict"]) for r in body["results"]] == [
        ("n1", "PASS"),
        ("n2", "PASS"),
    ]


async def test_skips_pass_unless_strict(served) -> None:
    sim, _ = served
    await sim.jobs.delete("tiny", "alice")
    for _ in range(10):
        await sim.ack_all("stop_workers")
        await sim.second()
    assert sim.jobs.job("tiny") is None
    done = await myoloctl(served, "preflight", "--only", "data")
    assert done.exit_code == 0, done.output
    assert len(lines_with(done.output, "data", "SKIP", "no job runs on this node")) == 2
    assert (await myoloctl(served, "preflight", "--only", "data", "--strict")).exit_code == 1


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("zz",), "node 'zz' is not in the fleet view (nodes[0])"),
        (tuple(a for c in CHECKS for a in ("--skip", c)), "every check is skipped"),
        (("--skip", "nccl", "--only", "data"), "--skip and --only: give one of them"),
        (("--min-driver", "newest"), "at `$.min_driver`; nothing was sent"),
        (("--only", "gpu"), "Invalid value for '--only'"),
    ],
)
async def test_bad_input_exits_2_naming_it(served, args: tuple[str, ...], words: str) -> None:
    done = await myoloctl(served, "preflight", *args)
    assert done.exit_code == 2, done.output
    assert words in done.output
