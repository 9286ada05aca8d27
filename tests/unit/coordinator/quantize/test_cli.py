"""`myoloctl registry quantize` and `registry quantizations` against a leading coordinator's real API (the
offline coordinator with the real registry and jobs components; no broker)."""

from __future__ import annotations

import json

import pytest

from myolo.coordinator.quantize.component import Quantize
from myolo.coordinator.registry.component import Registry
from myolo.coordinator.registry.interface import NewVersion
from tests.support.api_auth import VIEWER
from tests.support.coordinator.jobs_sim import JobSim
from tests.support.coordinator.served import myoloctl, serve


@pytest.fixture
async def served(tmp_path):
    sim = JobSim(tmp_path, nodes=("n1",), MYOLO_QUANTIZE_ARTIFACT_DIR=str(tmp_path / "q"))
    await sim.start()
    reg = sim.coord.get(Registry)
    await reg.register("lm", NewVersion(artifact=str(tmp_path / "v1.safetensors"), sha256="a" * 64), "operator:ada")
    async with serve(sim.coord) as url:
        yield sim, url
    await sim.close()


async def test_quantize_submits_the_job_and_lists_the_run(served) -> None:
    sim, url = served
    args = ("registry", "quantize", "lm", "1", "--scheme", "gptq", "--group-size", "64", "--calib", "/d/c.bin")
    done = await myoloctl(url, *args, "--eval", "/d/e.bin")
    assert done.exit_code == 0, done.output
    run = sim.coord.get(Quantize).runs()[0]
    assert f"quantization {run.name} submitted" in done.output and "gptq 4-bit g64, calib /d/c.bin" in done.output
    assert f"myoloctl get job {run.name}" in done.output
    again = await myoloctl(url, *args, "--eval", "/d/e.bin")
    assert again.exit_code == 0 and "asked for before" in again.output
    listed = await myoloctl(url, "registry", "quantizations")
    assert (
        listed.exit_code == 0 and run.name in listed.output and "lm v1" in listed.output and "running" in listed.output
    )
    as_json = json.loads((await myoloctl(url, "registry", "quantizations", "-o", "json")).output)
    assert [r["name"] for r in as_json["items"]] == [run.name]
    assert sim.job(run.name).spec.job.trainer.runtime.task == "quantize"


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("--scheme", "gptq"), 2, "--scheme gptq needs --calib"),
        (("--bits", "3"), 2, "--bits must be 4 or 8"),
        (("--scheme", "awq"), 2, "--scheme 'awq' is not one of"),
    ],
)
async def test_bad_options_exit_2_before_anything_is_sent(served, args, code, says) -> None:
    sim, url = served
    out = await myoloctl(url, "registry", "quantize", "lm", "1", *args)
    assert out.exit_code == code and says in out.output
    assert sim.coord.get(Quantize).runs() == ()


async def test_the_api_refuses_what_the_component_refuses_and_a_viewer_may_not_ask(served) -> None:
    url = served[1]
    missing = await myoloctl(url, "registry", "quantize", "lm", "7", "--scheme", "rtn")
    assert missing.exit_code != 0 and "model lm has no version 7" in missing.output
    viewer = await myoloctl(url, "registry", "quantize", "lm", "1", "--scheme", "rtn", who=VIEWER)
    assert viewer.exit_code != 0 and "viewer" in viewer.output
