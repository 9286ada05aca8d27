"""Codec cost per event on one core: encode, and decode + validate, for each event type.

Target: >= 200k decode+validate per second. Reported per type; the node sample is reported for
1 GPU and 8 GPUs since it is by far the largest and most frequent event. ``node_sample_bytes``: the agent's
simulated 8-GPU sample, published and as read, in JSON and in lz4 batches (:mod:`tests.benchmarks.sample_bytes`).
"""

from __future__ import annotations

import time

from myolo.events.codec import decode, encode
from myolo.events.envelope import new_event
from myolo.events.examples import example_payloads, node_sample
from tests.benchmarks import sample_bytes
from tests.benchmarks.common import write_result

TARGET_DECODES_PER_S = 200_000


def _rate(fn, n: int) -> float:
    """Calls per second of this process's CPU time (best of 5), so other load on the machine does not count."""
    fn()
    best = 0.0
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        best = max(best, n / max(time.process_time() - t0, 1e-9))
    return best


def measure(n: int = 20_000) -> dict:
    cases = dict(example_payloads())
    cases["ai.myolo.node.sample.v1 (8 GPUs)"] = cases.pop("ai.myolo.node.sample.v1")
    cases["ai.myolo.node.sample.v1 (1 GPU)"] = node_sample(gpus=1)
    rows = {}
    for name, payload in cases.items():
        event = new_event(payload, "bench/codec")
        key, value, headers = encode(event)
        rows[name] = {
            "bytes": len(value),
            "encode_per_s": round(_rate(lambda e=event: encode(e), n)),
            "decode_validate_per_s": round(_rate(lambda v=value, h=headers, k=key: decode(v, h, k), n)),
        }
    small = [r["decode_validate_per_s"] for k, r in rows.items() if "8 GPUs" not in k]
    return {
        "per_type": rows,
        "target_decode_validate_per_s": TARGET_DECODES_PER_S,
        "min_decode_validate_per_s_excluding_8gpu_sample": min(small),
        "median_decode_validate_per_s": sorted(r["decode_validate_per_s"] for r in rows.values())[len(rows) // 2],
        "node_sample_bytes": sample_bytes.measure(),
    }


def main() -> None:
    write_result("codec", measure())


if __name__ == "__main__":
    main()
