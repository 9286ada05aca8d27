"""The agent attaches a finished job's export manifest (``<export_path>.json``, rank 0's) to its completion,
and sends the completion without it, with a warning, when the file is not a manifest it can trust."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
import structlog

from myolo.agent.trainer.export import MAX_MANIFEST_BYTES, manifest_path, read_export
from myolo.events.payloads import EvalResult, ModelExport, StartWorkersArgs, TrainerJob
from tests.support.helpers import wait_until

EXPORT = ModelExport(
    artifact="/models/run/model.safetensors",
    sha256="a" * 64,
    size_bytes=989080,
    model="tiny",
    steps=3,
    data_sha256="b" * 64,
    eval=EvalResult(dataset="/data/eval.bin", dataset_sha256="c" * 64, tokens=128, loss=5.5, perplexity=244.7),
    init_from="/models/champion.safetensors",
)
IGNORED = "export manifest ignored; the completion goes out without it"


def warnings_of(logs: list[dict]) -> list[dict]:
    return [e for e in logs if e["event"] == IGNORED]


def test_the_manifest_sits_beside_the_export_relative_to_the_workers_directory(tmp_path: Path) -> None:
    assert manifest_path("out/model.safetensors", tmp_path) == tmp_path / "out" / "model.safetensors.json"
    assert manifest_path("/abs/m.st", tmp_path) == Path("/abs/m.st.json")


def test_a_manifest_is_read_strictly(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(msgspec.json.encode(EXPORT))
    assert read_export(path, job_id="j", generation=0) == EXPORT


def test_no_manifest_is_no_export_and_no_warning(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        assert read_export(tmp_path / "absent.json", job_id="j", generation=0) is None
    assert warnings_of(logs) == []


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p.write_bytes(b'{"artifact": "x", "sha256": '), "not a model export manifest"),
        (lambda p: p.write_bytes(msgspec.json.encode({**msgspec.to_builtins(EXPORT), "steps": "3"})), "`int`"),
        (lambda p: p.write_bytes(msgspec.json.encode({**msgspec.to_builtins(EXPORT), "sha256": "z"})), "sha256"),
        (lambda p: p.write_bytes(b" " * MAX_MANIFEST_BYTES + msgspec.json.encode(EXPORT)), "larger than 65536"),
        (lambda p: p.mkdir(), "cannot read it"),
        (fifo, "not a regular file"),  # opened without blocking: nobody ever writes to it
    ],
)
def test_a_bad_manifest_is_no_export_with_a_warning(tmp_path: Path, make, says: str) -> None:
    path = tmp_path / "m.json"
    make(path)
    with structlog.testing.capture_logs() as logs:
        assert read_export(path, job_id="j", generation=2) is None
    (warning,) = warnings_of(logs)
    assert (warning["job_id"], warning["generation"], warning["path"]) == ("j", 2, str(path))
    assert says in warning["reason"] and warning["log_level"] == "warning"


# ---- the supervisor, with real (fake) workers


def args(export_path: str | None, node_rank: int = 0, nnodes: int = 1) -> StartWorkersArgs:
    return StartWorkersArgs(
        job_id="j1",
        generation=0,
        node_rank=node_rank,
        nnodes=nnodes,
        gpus=[0, 1],
        master_addr="127.0.0.1",
        master_port=29500,
        job=TrainerJob.from_fields({"checkpoint.dir": "ckpt", "checkpoint.export_path": export_path}),
    )


def written(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


async def test_the_completion_carries_the_export_of_rank_0s_node(node_factory, tmp_path: Path) -> None:
    """A relative export path is the workers' (their run directory is where the trainer writes it)."""
    written(tmp_path / "workers" / "j1" / "g0" / "out" / "model.safetensors.json", msgspec.json.encode(EXPORT))
    node = await node_factory({"FAKE": "steps:3"})
    await node.sup.start(args("out/model.safetensors"))
    await wait_until(lambda: node.completions, 30, "the completion")
    assert node.completions[0].export == EXPORT


async def test_a_corrupt_manifest_sends_the_completion_without_it(node_factory, tmp_path: Path) -> None:
    written(tmp_path / "export" / "model.safetensors.json", b"{not json")
    node = await node_factory({"FAKE": "steps:3"})
    with structlog.testing.capture_logs() as logs:
        await node.sup.start(args(str(tmp_path / "export" / "model.safetensors")))
        await wait_until(lambda: node.completions, 30, "the completion")
    assert node.completions[0].export is None and node.completions[0].last_step == 3
    (warning,) = warnings_of(logs)
    assert "not a model export manifest" in warning["reason"]


async def test_an_oversized_manifest_sends_the_completion_without_it(node_factory, tmp_path: Path) -> None:
    written(tmp_path / "export" / "m.json", msgspec.json.encode(EXPORT) + b" " * MAX_MANIFEST_BYTES)
    node = await node_factory({"FAKE": "steps:3"})
    with structlog.testing.capture_logs() as logs:
        await node.sup.start(args(str(tmp_path / "export" / "m")))
        await wait_until(lambda: node.completions, 30, "the completion")
    assert node.completions[0].export is None
    assert "larger than 65536 bytes" in warnings_of(logs)[0]["reason"]


async def test_a_node_without_rank_0_or_a_job_without_export_path_sends_none(node_factory, tmp_path: Path) -> None:
    """Even where the manifest is visible (a shared folder): only rank 0's node reports it."""
    written(tmp_path / "export" / "m.json", msgspec.json.encode(EXPORT))
    node = await node_factory({"FAKE": "steps:2"})
    await node.sup.start(args(str(tmp_path / "export" / "m"), node_rank=1, nnodes=2))
    await wait_until(lambda: node.completions, 30, "the completion")
    assert node.completions[0].ranks == [2, 3] and node.completions[0].export is None
    other = await node_factory({"FAKE": "steps:2"})
    await other.sup.start(msgspec.structs.replace(args(None), job_id="j2"))
    await wait_until(lambda: other.completions, 30, "the second completion")
    assert other.completions[0].export is None
