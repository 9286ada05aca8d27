"""The quantization job a run submits: its name, where it writes, and its ElasticJob manifest.

One replica of one GPU (tp = pp = 1), ``task: quantize``: the worker reads the source's weights
(``initFrom``, checked against ``initFromSha256``, the registry's digest), quantizes them with the request's
scheme and grid, and writes ``exportPath`` and its manifest, which the agent attaches to the completion.
The name is a digest of the model, the version and the request, so asking twice is one run.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath
from typing import Any

import msgspec
import yaml

from myolo.coordinator.quantize.config import QuantizeConfig
from myolo.coordinator.quantize.records import QuantizeRequest
from myolo.coordinator.registry.interface import local_path

MAX_JOB_NAME = 63


def job_name(model: str, version: int, request: QuantizeRequest) -> str:
    """``<model>-v<n>-<scheme>-<bits>b-<8 hex>``, a DNS label; the hex is of everything asked."""
    tag = hashlib.sha256(msgspec.json.encode([model, version, request])).hexdigest()[:8]
    scheme = {"dynamic_fixed_point": "dfp"}.get(request.scheme, request.scheme)
    tail = f"-v{version}-{scheme}-{request.bits}b-{tag}"
    stem = re.sub(r"[^a-z0-9-]+", "-", model.lower()).strip("-") or "model"
    stem = stem[: MAX_JOB_NAME - len(tail)].rstrip("-") or "m"
    return stem + tail


def export_path(cfg: QuantizeConfig, job: str) -> str:
    return str(PurePosixPath(cfg.artifact_dir) / job / "model.safetensors")


def source_path(artifact: str, version: int) -> str:
    """A path the worker can open: ``file://`` stripped; another scheme cannot be read."""
    path = local_path(artifact)
    if path is None:
        raise ValueError(
            f"version {version} is at {artifact}, which the trainer cannot open; copy it to shared storage and "
            "register that path"
        )
    return path


def manifest(cfg: QuantizeConfig, job: str, request: QuantizeRequest, source: str, source_sha256: str) -> str:
    quantization: dict[str, Any] = {
        "bits": request.bits,
        "scheme": request.scheme,
        "calibSequences": cfg.calib_sequences,
    }
    data: dict[str, Any] = {"seqLen": cfg.seq_len, "globalBatch": cfg.eval_rows, "evalBatches": cfg.eval_batches}
    trainer: dict[str, Any] = {
        "runtime": {"task": "quantize", "device": cfg.device},
        "checkpoint": {"initFrom": source, "initFromSha256": source_sha256, "exportPath": export_path(cfg, job)},
        "quantization": quantization,
        "data": data,
    }
    if request.group_size is not None:
        quantization["groupSize"] = request.group_size
    if request.calib is not None:
        quantization["calibPath"] = request.calib
    if request.eval is not None:
        data["evalPath"] = request.eval
    doc = {
        "apiVersion": "myolo.ai/v1",
        "kind": "ElasticJob",
        "metadata": {"name": job, "labels": {"task": "quantize"}},
        "spec": {"minReplicas": 1, "maxReplicas": 1, "replica": {"tp": 1, "pp": 1}, "trainer": trainer},
    }
    return yaml.safe_dump(doc, sort_keys=False)
