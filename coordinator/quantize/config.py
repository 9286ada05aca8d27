"""The ``[quantize]`` section: where quantized models are written, and the job settings each run gets."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec


class QuantizeConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``artifact_dir``: shared storage every node can write, under which each run writes
    ``<job>/model.safetensors`` (empty: quantization requests are refused, naming this key). ``device``: the
    job's (auto: a GPU when the node has one). The calibration and evaluation reads: ``seq_len`` tokens per
    sequence, ``calib_sequences`` sequences, ``eval_batches`` batches of ``eval_rows``. ``export_wait_s``: how long
    after a job succeeded its export may take to be heard of before the run is called failed."""

    artifact_dir: str = ""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    seq_len: Annotated[int, msgspec.Meta(ge=8, le=1 << 16)] = 256
    calib_sequences: Annotated[int, msgspec.Meta(ge=1, le=1 << 16)] = 128
    eval_batches: Annotated[int, msgspec.Meta(ge=1, le=1 << 16)] = 16
    eval_rows: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 8
    max_runs: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1000
    export_wait_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 300.0
