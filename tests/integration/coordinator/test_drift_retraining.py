"""Drift to a new model version, end to end: the local stack (real Kafka, a coordinator, an agent with a
simulated GPU), real trainer processes, kcat as the serving side, myoloctl as the operator.

The champion (version 1) is a real export of ``myolo-train``, registered with its manifest; its references
come from a CSV of production-like data. kcat (librdkafka, not our client) then writes samples whose three
features moved: the coordinator detects the drift, submits the model's retraining template from the
champion's weights, the job trains and exports, and version 2 is registered with its lineage back to the
drift event. Waits poll a condition with a deadline: the rule's windows are seconds long here.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from myolo.coordinator.localstack import stack
from myolo.coordinator.localstack.broker import LocalBroker
from myolo.events.payloads import DriftSample, FeatureSummary
from myolo.events.topics import DRIFT_SAMPLES
from tests.support.helpers import kcat, pids_mentioning, poll_until, structured

REPO = Path(__file__).resolve().parents[3]
MODEL = "credit-risk"
FEATURES = [f"f{i}" for i in range(8)]
SHIFTED = ("f1", "f4", "f6")
TEMPLATE = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
spec:
  minReplicas: 1
  maxReplicas: 1
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: 4}}, data: {{globalBatch: 4, seqLen: 32, path: {data}, evalPath: {heldout}, evalBatches: 2}}, runtime: {{seed: 1}}}}
  checkpointDir: {ckpt}
"""


def _until(what: str, check: Callable[[], Any], timeout: float = 120.0) -> Any:
    return poll_until(what, check, timeout)


def _tokens(path: Path, n: int, seed: int) -> Path:
    np.random.default_rng(seed).integers(0, 256, size=n).astype(np.uint16).tofile(path)
    return path


def _champion(tmp_path: Path, data: Path, heldout: Path) -> Path:
    """Version 1: a real training run's export (safetensors and its manifest)."""
    out = tmp_path / "v1" / "model.safetensors"
    cmd = [sys.executable, "-m", "myolo.kernels.cli.launch", "--nproc", "1", "--model", "tiny", "--steps", "2"]
    cmd += ["--global-batch", "4", "--seq-len", "32", "--data", str(data), "--device", "cpu"]
    cmd += ["--checkpoint-dir", str(tmp_path / "v1" / "ckpt"), "--export-path", str(out), "--eval-data", str(heldout)]
    cmd += ["--eval-batches", "2"]
    run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert out.exists() and Path(f"{out}.json").exists()
    return out


def _reference_csv(path: Path, rng: np.random.Generator) -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*FEATURES, "plan"])
        for _ in range(3000):
            w.writerow([f"{v:.5f}" for v in rng.normal(0.0, 1.0, len(FEATURES))] + [rng.choice(["basic", "pro"])])
    return path


def _samples(rng: np.random.Generator, shift: float, n: int) -> bytes:
    """``n`` drift samples of 40 rows each, as one kcat batch (records separated by 0x1e)."""
    records = []
    for _ in range(n):
        features = {
            f: FeatureSummary(values=[round(float(v), 5) for v in rng.normal(shift if f in SHIFTED else 0.0, 1.0, 40)])
            for f in FEATURES
        }
        features["plan"] = FeatureSummary(categories={"basic": 20, "pro": 20})
        sample = DriftSample(model=MODEL, version="1", count=40, features=features)
        records.append(structured(sample, source="/serving/credit-risk"))
    return b"\x1e".join(records)


@pytest.mark.kafka
def test_kcat_drift_retrains_the_champion_and_registers_version_2_with_its_lineage(
    tmp_path: Path, local_myoloctl
) -> None:
    myoloctl = local_myoloctl
    rng = np.random.default_rng(11)
    data, heldout = _tokens(tmp_path / "fresh.bin", 8000, 1), _tokens(tmp_path / "heldout.bin", 4000, 2)
    broker = LocalBroker(tmp_path, tied_to_parent=True)
    try:
        broker.start(timeout=120)
        stack.start_members(tmp_path, coordinators=1, nodes=1, gpus=1, timeout=120, progress=lambda _: None)
        bootstrap = broker.bootstrap

        # the champion, its retraining template and its references
        v1 = _champion(tmp_path, data, heldout)
        reg = myoloctl("registry", "register", MODEL, "--artifact", str(v1), "--metrics", f"{v1}.json")
        assert reg.exit_code == 0, reg.output
        promote = myoloctl("registry", "alias", "set", MODEL, "champion", "1", "--reason", "first model")
        assert promote.exit_code == 0, promote.output
        template = tmp_path / "retrain.yaml"
        template.write_text(TEMPLATE.format(data=data, heldout=heldout, ckpt=tmp_path / "ckpt"))
        model_set = myoloctl(
            "registry", "model", "set", MODEL, "--retrain", str(template), "--artifact-dir", str(tmp_path / "models"),
            "--from-champion", "--cooldown", "1h",
        )  # fmt: skip
        assert model_set.exit_code == 0, model_set.output
        rule = myoloctl(
            "drift", "rule", "set", MODEL, "--window", "60s", "--every", "10s", "--consecutive", "2",
            "--min-count", "100", "--share", "0.2",
        )  # fmt: skip
        assert rule.exit_code == 0, rule.output
        baseline = myoloctl("drift", "baseline", "set", MODEL, "--from", str(_reference_csv(tmp_path / "ref.csv", rng)))
        assert baseline.exit_code == 0, baseline.output
        assert "references of 9 feature(s) recorded" in baseline.output
        view = json.loads(myoloctl("drift", "status", MODEL, "-o", "json").output)
        assert sorted(r["feature"] for r in view["references"]) == sorted([*FEATURES, "plan"])
        assert {r["version"] for r in view["references"]} == {"1"}  # the champion's, by default

        # the serving side writes samples with three shifted features, through kcat
        kcat(bootstrap, DRIFT_SAMPLES, MODEL, _samples(rng, 1.0, 30))

        def detected() -> dict | None:
            out = json.loads(myoloctl("drift", "status", MODEL, "-o", "json").output)
            versions = [v for v in out["versions"] if v.get("detections")]
            if not versions:
                kcat(bootstrap, DRIFT_SAMPLES, MODEL, _samples(rng, 1.0, 5))  # the window keeps some traffic
                return None
            return out

        status = _until("the drift to be detected", detected, timeout=90)
        (version,) = status["versions"]
        drifted = {f["feature"] for f in version["features"] if f.get("drifted")}
        assert drifted == set(SHIFTED), version["features"]
        detection = version["detections"][-1]
        table = myoloctl("drift", "status", MODEL)
        assert table.exit_code == 0 and "DRIFT" in table.output and "f4" in table.output, table.output

        # the retraining job runs from the champion's weights and its export becomes version 2
        def registered() -> dict | None:
            run = json.loads(myoloctl("drift", "status", MODEL, "-o", "json").output).get("retrain") or {}
            assert run.get("state") != "failed", run
            return run if run.get("state") == "registered" else None

        run = _until("the retrained version to be registered", registered, timeout=240)
        assert run["detection_id"] == detection and run["parent"] == 1 and run["registered"] == 2
        job = json.loads(myoloctl("get", "job", run["job"], "-o", "json").output)
        assert job["phase"] == "Succeeded" and job["spec"]["trainer"]["checkpoint"]["init_from"] == str(v1)

        versions = myoloctl("registry", "versions", MODEL)
        assert versions.exit_code == 0, versions.output
        assert "2" in versions.output and run["job"] in versions.output
        shown = json.loads(myoloctl("registry", "show", MODEL, "2", "-o", "json").output)
        v2 = shown
        assert (v2["parent"], v2["drift_event"], v2["job"]) == (1, detection, run["job"])
        assert [v["version"] for v in shown["lineage"]] == [2, 1]
        assert Path(run["export"]["artifact"]).exists()
        assert {m["type"] for m in v2["model_index"][0]["results"][0]["metrics"]} == {"loss", "perplexity"}
        aliases = json.loads(myoloctl("registry", "alias", "list", MODEL, "-o", "json").output)
        assert {a["alias"]: a["version"] for a in aliases["items"]} == {"champion": 1, "challenger": 2}
    finally:
        stack.stop_members(tmp_path, progress=lambda _: None)
        broker.stop()
        for pid in pids_mentioning(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
