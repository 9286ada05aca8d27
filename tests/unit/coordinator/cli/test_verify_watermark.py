"""``myoloctl registry verify-watermark``: a registered marked export verifies with its key (the check runs in a
real ``myolo.kernels.cli.watermark`` process), another key is refused against the registry's commitment before any
check runs, and the registry holds the commitment only."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from myolo.common.keys import write_secret
from myolo.kernels.export.manifest import manifest_path
from myolo.kernels.watermark.files import EmbedSpec, embed_file
from myolo.kernels.watermark.mark import DigitalWatermark
from tests.support.coordinator.registry import Leading
from tests.support.coordinator.served import myoloctl, serve
from tests.support.kernels.marked import tiny_export, token_file


@pytest.fixture(scope="module")
def marked(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("wm")
    source = tiny_export(d / "tiny.safetensors", step=3)
    data = token_file(d / "train.bin", 20_000)
    key, other = d / "owner.key", d / "other.key"
    write_secret(key)
    write_secret(other)
    out = d / "marked.safetensors"
    spec = EmbedSpec(source=str(source), output=str(out), data=str(data), steps=40, lr=1e-3, batch=4, seq_len=32)
    embed_file(DigitalWatermark.from_key_file(str(key)), spec)
    return {"artifact": out, "key": key, "other": other}


@pytest.fixture
async def served(tmp_path: Path, marked) -> AsyncIterator[tuple[Leading, str]]:
    lead = await Leading(tmp_path).lead()
    async with serve(lead.coord) as url:
        art = marked["artifact"]
        done = await myoloctl(
            url, "registry", "register", "owned", "--artifact", str(art), "--metrics", str(manifest_path(art))
        )
        assert done.exit_code == 0, done.output
        yield lead, url


async def test_the_owners_key_verifies_the_registered_version(served, marked) -> None:
    lead, url = served
    version = lead.registry.version("owned", 1)
    assert version is not None and version.watermark is not None
    secret = marked["key"].read_text().strip()
    assert secret not in msgspec.json.encode(version).decode()
    done = await myoloctl(url, "registry", "verify-watermark", "owned", "1", "--key-file", str(marked["key"]))
    assert done.exit_code == 0, done.output
    assert "256/256 bits match" in done.output and "MARKED" in done.output
    shown = await myoloctl(url, "registry", "show", "owned", "1")
    assert "Watermark" in shown.output and version.watermark.commitment[:16] in shown.output
    answer = json.loads((await myoloctl(url, "registry", "show", "owned", "1", "-o", "json")).output)
    assert answer["watermark"]["commitment"] == version.watermark.commitment


async def test_another_key_is_refused_against_the_recorded_commitment(served, marked) -> None:
    _, url = served
    done = await myoloctl(url, "registry", "verify-watermark", "owned", "1", "--key-file", str(marked["other"]))
    assert done.exit_code == 2
    assert "not the one that marked owned version 1" in done.output and "commitment" in done.output
