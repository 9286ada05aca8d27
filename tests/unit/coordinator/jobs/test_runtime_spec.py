"""``spec.runtime.deterministic``: on unless a manifest turns it off, and carried to every node of a generation
in the start command's job (then, on the node, to every worker: tests/unit/agent/trainer/test_deterministic_env.py)."""

from __future__ import annotations

import msgspec
import pytest

from myolo.coordinator.cli.describe import runtime_line
from myolo.coordinator.jobs.manifest import ManifestError, parse_manifest
from myolo.events.payloads.commands import StartWorkersArgs
from tests.support.coordinator.jobs_sim import JobSim

MANIFEST = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: tiny}}
spec:
  minReplicas: 3
  maxReplicas: 3
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: 400}}, data: {{globalBatch: 6}}}}
{runtime}"""


def test_the_mode_is_on_by_default_and_a_manifest_turns_it_off() -> None:
    assert parse_manifest(MANIFEST.format(runtime="")).trainer.runtime.deterministic is True
    spec = parse_manifest(MANIFEST.format(runtime="  runtime: {deterministic: false}\n"))
    assert spec.trainer.runtime.deterministic is False


def test_the_trainer_section_does_not_take_it_and_says_where_it_goes() -> None:
    text = MANIFEST.format(runtime="").replace("globalBatch: 6", "globalBatch: 6, deterministic: false")
    with pytest.raises(ManifestError, match=r"spec\.trainer\.data\.deterministic: unknown field \(it is spec\.runtime"):
        parse_manifest(text)
    in_runtime = MANIFEST.format(runtime="").replace(", data: {", ", runtime: {deterministic: false}, data: {")
    with pytest.raises(ManifestError, match=r"spec\.trainer\.runtime\.deterministic: unknown field \(it is spec\.runt"):
        parse_manifest(in_runtime)
    with pytest.raises(ManifestError, match=r"spec\.runtime\.deterministic"):
        parse_manifest(MANIFEST.format(runtime="  runtime: {deterministic: 'no'}\n"))


def test_describe_job_says_which_mode_and_how_to_change_it() -> None:
    assert "spec.runtime.deterministic: false" in runtime_line(True) and ":4096:8" in runtime_line(True)
    assert runtime_line(False).startswith("fast (cudnn.benchmark")


@pytest.mark.parametrize("deterministic", [True, False])
async def test_every_nodes_start_command_carries_the_mode(tmp_path, deterministic: bool) -> None:
    sim = JobSim(tmp_path, nodes=("n1", "n2", "n3"))
    await sim.start()
    try:
        runtime = "" if deterministic else "  runtime: {deterministic: false}\n"
        await sim.jobs.apply(MANIFEST.format(runtime=runtime), "alice")
        await sim.second()
        starts = [msgspec.convert(c.args, StartWorkersArgs) for c in sim.sent("start_workers")]
        assert sorted(c.node_id for c in sim.sent("start_workers")) == ["n1", "n2", "n3"]
        assert [a.job.runtime.deterministic for a in starts] == [deterministic] * 3
        # on the wire: the default is left out (omit_defaults), and off is said
        assert all(
            ("deterministic" in c.args["job"].get("runtime", {})) is (not deterministic)
            for c in sim.sent("start_workers")
        )
    finally:
        await sim.close()
