"""The published form of a node sample: NVLink summarised per GPU, per-link detail only where it says something.

A GPU has up to 18 links, nearly always all up with every error counter at zero: listed one by one, they were
most of a sample's bytes. The summary (links, links up, each counter summed) keeps all that meaning, and a link
down or counting an error is still listed with its counters. Pure and idempotent; readers of the old form
still decode the result (new fields are optional, listed links are unchanged).
"""

from __future__ import annotations

import msgspec

from myolo.events.payloads.node import NVLINK_COUNTERS, GpuReading, NodeSample, NvLink


def notable(nl: NvLink) -> bool:
    """A link worth listing: down, or any error counter above zero."""
    return not nl.active or any(getattr(nl, c) for c in NVLINK_COUNTERS)


def compact_gpu(r: GpuReading) -> GpuReading:
    """``r`` with its NVLink summary filled in and ``nvlink`` cut to the notable links (None: none is)."""
    up = r.nvlink_up
    if up is None:
        return r
    listed = [nl for nl in r.nvlink or () if notable(nl)]
    totals = {f"nvlink_{c}": r.nvlink_error_total(c) for c in NVLINK_COUNTERS}
    return msgspec.structs.replace(r, nvlink=listed or None, nvlink_active=up[0], nvlink_links=up[1], **totals)


def compact_sample(sample: NodeSample) -> NodeSample:
    """``sample`` as the agent publishes it: every GPU through :func:`compact_gpu`."""
    return msgspec.structs.replace(sample, gpus=[compact_gpu(g) for g in sample.gpus])
