"""What the quantize component writes to ``myolo.state.quantize``: one record per run, ``run/<job>``.

A run is written before its job is submitted and after each change of its state, so a new leader follows the
same runs. ``QuantizeRequest`` is what an operator asks for; the run adds what the coordinator decided (the
job's name, the source's artifact and SHA-256 as the registry holds them) and what happened.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from myolo.events.payloads.models import ModelExport, QuantScheme
from myolo.events.payloads.trainer_job import PathStr

RunState = Literal["running", "registered", "failed"]


class QuantizeRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True, omit_defaults=True):
    """``POST /v1/models/{model}/versions/{version}/quantize``. ``calib``: a token file every node can read
    (the training data's format); ``eval``: a held-out token file (never the calibration tokens), on which the
    source and the quantized model are evaluated side by side. ``group_size`` None: 128 at 4 bits, rows at 8."""

    bits: Literal[4, 8] = 4
    scheme: QuantScheme = "gptq"
    group_size: Annotated[int, msgspec.Meta(ge=0, le=4096)] | None = None
    calib: PathStr | None = None
    eval: PathStr | None = None


class QuantizeRun(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """One quantization of ``model`` version ``version``: its job ``name``, and what came of it."""

    name: str
    model: str
    version: int
    request: QuantizeRequest
    source_artifact: str
    source_sha256: str
    export_path: str
    submitted: float
    by: str
    state: RunState = "running"
    reason: str = ""
    generation: int | None = None
    export: ModelExport | None = None
    registered: int | None = None  # the version it became


def run_key(name: str) -> str:
    return f"run/{name}"


STATE_QUANTIZE = "myolo.state.quantize"
