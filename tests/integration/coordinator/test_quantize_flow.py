"""The registry's quantization flow end to end on the local stack: real Kafka, a coordinator, three agents and a
real worker process. A registered version is quantized by ``myoloctl registry quantize``: a one-replica job runs
GPTQ on a node, and the result comes back as the version's child with its lineage, its quantization and both
held-out evaluations on the same tokens, which ``registry show`` prints."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
import torch

from myolo.coordinator.localstack.broker import LocalBroker
from myolo.kernels.export.weights import weights_metadata, write_weights
from myolo.kernels.model import GPT, preset
from myolo.kernels.quantization import load_quantized
from tests.support.coordinator import local


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_a_registered_version_is_quantized_by_a_job_and_comes_back_as_its_child(tmp_path: Path, local_myoloctl) -> None:
    myoloctl = local_myoloctl
    torch.manual_seed(0)
    source = tmp_path / "models" / "v1.safetensors"
    write_weights(GPT(preset("tiny")).state_dict(), source, weights_metadata("tiny", 100))
    tokens = torch.randint(0, 256, (80_000,), generator=torch.Generator().manual_seed(1)).to(torch.int16)
    calib, held_out = tmp_path / "calib.bin", tmp_path / "heldout.bin"
    calib.write_bytes(tokens[:40_000].numpy().tobytes())
    held_out.write_bytes(tokens[40_000:].numpy().tobytes())
    broker = LocalBroker(tmp_path, tied_to_parent=True)
    try:
        broker.start(timeout=120)
        local.start_members(tmp_path, coordinators=1)
        registered = myoloctl("registry", "register", "lm", "--artifact", str(source))
        assert registered.exit_code == 0, registered.output
        began = time.monotonic()
        asked = myoloctl(
            "registry", "quantize", "lm", "1", "--bits", "4", "--scheme", "gptq", "--group-size", "32",
            "--calib", str(calib), "--eval", str(held_out), "--wait", "--timeout", "600",
        )  # fmt: skip
        took = time.monotonic() - began
        assert asked.exit_code == 0, asked.output
        assert "registered as lm v2 (parent v1)" in asked.output

        v2 = json.loads(myoloctl("registry", "show", "lm", "2", "-o", "json").output)
        q = v2["quantization"]
        assert (v2["parent"], q["scheme"], q["bits"], q["group_size"], q["layers"]) == (1, "gptq", 4, 32, 28)
        assert q["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
        assert q["calib_sha256"] == hashlib.sha256(calib.read_bytes()).hexdigest()
        revision = v2["model_index"][0]["results"][0]["dataset"]["revision"]
        assert revision == q["source_eval"]["dataset_sha256"] == hashlib.sha256(held_out.read_bytes()).hexdigest()
        assert v2["tags"] == {"quantized": "gptq-4bit-g32"} and v2["job"].startswith("lm-v1-gptq-4b-")
        shown = " ".join(myoloctl("registry", "show", "lm", "2").output.split())
        assert "Quantized: gptq, 4 bits, groups of 32: 28 layers" in shown and "against the parent's" in shown
        model, _, spec = load_quantized(v2["artifact"])  # what the registry names is the quantized model
        assert spec.source_sha256 == q["source_sha256"] and model(torch.tensor([[1, 2, 3]])).shape == (1, 3, 256)
        listed = myoloctl("registry", "quantizations")
        assert "registered" in listed.output and "v2" in listed.output
        print(f"\nquantize flow: lm v1 -> v2 (gptq g32) registered {took:.1f} s after the request")
    finally:
        local.stop_all(tmp_path, broker)
