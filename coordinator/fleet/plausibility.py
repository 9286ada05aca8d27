"""Checks of what a schema cannot say: values that each look fine alone but cannot be true together.

msgspec already rejects 140 % utilisation or negative memory while decoding (those records are dead-lettered
by the consumer). What reaches here is well-formed; a record that still cannot be true (more memory used
than the GPU has, a GPU at 400 degrees, the same GPU twice) is flagged with the reason and not applied, so
one broken agent cannot paint a healthy picture of a node, nor a false alarm.
"""

from __future__ import annotations

from myolo.events.payloads import LeakReport, NcclReport, NodeFault, NodeSample

MAX_GPUS = 64
TEMP_RANGE_C = (-40.0, 150.0)
MAX_POWER_W = 5_000.0
MAX_CLOCK_MHZ = 10_000
MAX_INTERVAL_S = 3_600.0


def check_sample(s: NodeSample) -> str | None:
    """The first impossible thing in a sample, as ``field: reason``, or None.

    Every sample of the fleet passes here, so the common case (nothing wrong) is one pass of plain
    comparisons; only a sample that fails one is walked again to name the field."""
    gpus = s.gpus
    if len(gpus) > MAX_GPUS or not 0 < s.interval_s <= MAX_INTERVAL_S:
        return _first_problem(s)
    lo, hi = TEMP_RANGE_C
    for g in gpus:
        used, total, t, tm, p = g.mem_used_bytes, g.mem_total_bytes, g.temp_gpu_c, g.temp_mem_c, g.power_w
        sm, mem = g.clock_sm_mhz, g.clock_mem_mhz
        if (
            (used is not None and total is not None and used > total)
            or (t is not None and not lo <= t <= hi)
            or (tm is not None and not lo <= tm <= hi)
            or (p is not None and p > MAX_POWER_W)
            or (sm is not None and sm > MAX_CLOCK_MHZ)
            or (mem is not None and mem > MAX_CLOCK_MHZ)
        ):
            return _first_problem(s)
    if len({g.index for g in gpus}) != len(gpus):
        return _first_problem(s)
    return None


def _first_problem(s: NodeSample) -> str | None:
    """What :func:`check_sample` found, named: the first wrong field in the sample's order."""
    if len(s.gpus) > MAX_GPUS:
        return f"gpus: {len(s.gpus)} GPUs on one node (at most {MAX_GPUS})"
    if not 0 < s.interval_s <= MAX_INTERVAL_S:
        return f"interval_s: {s.interval_s} is not a sample interval (0 < interval_s <= {MAX_INTERVAL_S:.0f})"
    seen: set[int] = set()
    for i, g in enumerate(s.gpus):
        at = f"gpus[{i}]"
        if g.index in seen:
            return f"{at}.index: GPU index {g.index} appears twice"
        seen.add(g.index)
        if g.mem_total_bytes is not None and g.mem_used_bytes is not None and g.mem_used_bytes > g.mem_total_bytes:
            return f"{at}.mem_used_bytes: {g.mem_used_bytes} used is more than the {g.mem_total_bytes} total"
        for name in ("temp_gpu_c", "temp_mem_c"):
            t = getattr(g, name)
            if t is not None and not TEMP_RANGE_C[0] <= t <= TEMP_RANGE_C[1]:
                return f"{at}.{name}: {t} C is outside {TEMP_RANGE_C[0]:.0f}..{TEMP_RANGE_C[1]:.0f} C"
        if g.power_w is not None and g.power_w > MAX_POWER_W:
            return f"{at}.power_w: {g.power_w} W is more than any GPU draws ({MAX_POWER_W:.0f} W)"
        for name in ("clock_sm_mhz", "clock_mem_mhz"):
            c = getattr(g, name)
            if c is not None and c > MAX_CLOCK_MHZ:
                return f"{at}.{name}: {c} MHz is above {MAX_CLOCK_MHZ} MHz"
    return None


def check_fault(f: NodeFault, gpu_count: int | None) -> str | None:
    if f.gpu_index is not None and gpu_count is not None and f.gpu_index >= gpu_count:
        return f"gpu_index: GPU {f.gpu_index} does not exist on a node with {gpu_count} GPUs"
    return None


def check_nccl(r: NcclReport) -> str | None:
    if r.rank is not None and r.nranks is not None and r.rank >= r.nranks:
        return f"rank: rank {r.rank} is not below nranks {r.nranks}"
    return None


def check_leak(r: LeakReport) -> str | None:
    if not r.lower_pct_per_h <= r.slope_pct_per_h <= r.upper_pct_per_h:
        return (
            f"slope_pct_per_h: {r.slope_pct_per_h} is outside its own interval "
            f"[{r.lower_pct_per_h}, {r.upper_pct_per_h}]"
        )
    if not 0 < r.confidence < 1:
        return f"confidence: {r.confidence} is not a probability in (0, 1)"
    return None
