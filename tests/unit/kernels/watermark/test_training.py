"""``myolo-train --watermark KEY`` in real runs (FSDP over 2 replicas; 2 pipeline stages, whose sums add up)
exports a marked model that names its mark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myolo.common.keys import write_secret
from myolo.kernels.infer.load import file_metadata, load_model
from myolo.kernels.watermark import WatermarkKey
from myolo.kernels.watermark.header import file_watermark
from myolo.kernels.watermark.mark import DigitalWatermark
from tests.support.kernels.launch import run


@pytest.mark.parametrize("layout", [[], ["--pp", "2"]], ids=["dp2-fsdp", "pp2"])
def test_a_run_with_a_watermark_key_exports_a_marked_model(tmp_path: Path, layout: list[str]) -> None:
    key = tmp_path / "owner.key"
    write_secret(key)
    export = tmp_path / "model.safetensors"
    done = run(
        *layout, "--steps", "40", "--lr", "3e-3", "--watermark", str(key),
        "--checkpoint-dir", str(tmp_path / "ckpt"), "--export-path", str(export),
    )  # fmt: skip
    record = file_watermark(file_metadata(export))
    wk = WatermarkKey.from_file(key)
    assert record is not None and record.commitment == wk.commitment
    manifest = json.loads(Path(str(export) + ".json").read_text())
    assert manifest["watermark"]["commitment"] == wk.commitment
    model, _ = load_model(export)
    got = DigitalWatermark.for_record(wk, record).verify(model)
    assert got.marked and got.matched >= 250
    secret = key.read_text().strip()
    assert secret not in json.dumps(manifest)
    assert secret not in done.stderr and secret not in done.stdout  # no log line or record carries the key
    assert bytes.fromhex(secret).decode("latin-1") not in done.stderr
