"""Both guards inside a real run: ``myolo-train --watermark KEY`` exports a marked model that names its mark,
and ``--defense gradient_compression`` trains two gloo replicas on sparse messages, reporting their bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from events.keys import write_secret
from kernels.infer.load import file_metadata, load_model
from kernels.watermark import WatermarkKey
from kernels.watermark.header import file_watermark
from kernels.watermark.mark import DigitalWatermark

REPO = Path(__file__).resolve().parents[4]
BASE = ["--nproc", "2", "--model", "tiny", "--model-arg", "n_layers=2", "--global-batch", "8", "--seq-len", "32"]


def train(tmp: Path, *flags: str) -> list[dict]:
    cmd = [sys.executable, "-m", "kernels.cli.launch", *BASE, "--device", "cpu", "--json", *flags]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_a_run_with_a_watermark_key_exports_a_marked_model(tmp_path: Path) -> None:
    key = tmp_path / "owner.key"
    write_secret(key)
    export = tmp_path / "model.safetensors"
    train(
        tmp_path, "--steps", "40", "--lr", "3e-3", "--watermark", str(key),
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
    assert key.read_text().strip() not in json.dumps(manifest)


def test_a_defended_run_sends_a_share_of_the_dense_bytes(tmp_path: Path) -> None:
    records = train(tmp_path, "--steps", "6", "--defense", "gradient_compression", "--param", "0.01")
    steps = [r for r in records if r.get("event") == "step"]
    assert len(steps) == 6 and all(r["exchange_bytes"] > 0 for r in steps)
    start = next(r for r in records if r.get("event") == "start")
    dense = 4 * start["params"]
    ratio = steps[-1]["exchange_bytes"] / dense
    assert 0.01 <= ratio <= 0.05  # 1 % of the coordinates, an index with each top-k value, whole drawn rows
    assert all("exchange_bytes" not in r for r in train(tmp_path, "--steps", "2") if r.get("event") == "step")


def test_the_defense_exchanges_each_tensor_parallel_shard(tmp_path: Path) -> None:
    records = train(tmp_path, "--tp", "2", "--steps", "3", "--defense", "gradient_compression", "--param", "0.1")
    steps = [r for r in records if r.get("event") == "step"]
    assert len(steps) == 3 and all(r["exchange_bytes"] > 0 for r in steps)
